//! One process-wide TLS crypto provider: aws-lc-rs, the one every dependency is built with (the
//! gitlab crate's reqwest enables it and nothing can turn that off; a second provider would
//! double the crypto build and leave rustls unable to pick one by itself).

use std::sync::Once;

/// Installs aws-lc-rs as the default rustls provider (idempotent). Call before building any client.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means another provider was installed first: that one is used, which is fine.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    });
}

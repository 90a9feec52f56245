//! One process-wide TLS crypto provider. Several dependencies enable different rustls backends
//! (ring, aws-lc-rs), and then rustls cannot pick one by itself: fluxplan picks ring.

use std::sync::Once;

/// Installs ring as the default rustls provider (idempotent). Call before building any client.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means another provider was installed first: that one is used, which is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

//! The kustomize worker: a process of this same binary (`fluxplan kustomize-worker LIB`) that
//! loads kustomize's Go library and answers build requests from its parent over pipes. The
//! parent starts it confined (see `pool`); the Go runtime never enters the parent.
//!
//! Frames both ways: one tag byte, an 8-byte big-endian length, the payload.
//! - worker → parent at start: `V` + the library's kustomize version;
//! - parent → worker: `B` + the directory to build (raw path bytes);
//! - worker → parent: `O` + the YAML stream, or `E` + kustomize's error message.

use std::ffi::{c_char, c_int, CStr, CString};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;

/// The hidden subcommand that starts a worker.
pub const SUBCOMMAND: &str = "kustomize-worker";

pub const HELLO: u8 = b'V';
pub const BUILD: u8 = b'B';
pub const OUTPUT: u8 = b'O';
pub const ERROR: u8 = b'E';

/// How kustomize-controller builds: no load restrictions (the reference check and the sandbox
/// stand in for them), legacy ordering, no plugins, no Helm, no managed-by label.
const BUILD_OPTIONS: &str = r#"{"load_restrictions": 1, "reorder": "legacy", "add_managedby_label": false, "enable_plugins": false, "enable_helm": false, "helm_command": ""}"#;

pub fn write_frame(to: &mut impl Write, tag: u8, payload: &[u8]) -> std::io::Result<()> {
    to.write_all(&[tag])?;
    to.write_all(&(payload.len() as u64).to_be_bytes())?;
    to.write_all(payload)?;
    to.flush()
}

/// Reads a frame's header: its tag and length.
pub fn read_header(from: &mut impl Read) -> std::io::Result<(u8, u64)> {
    let mut header = [0u8; 9];
    from.read_exact(&mut header)?;
    Ok((header[0], u64::from_be_bytes(header[1..].try_into().expect("8 bytes"))))
}

type BuildFn = unsafe extern "C" fn(*mut c_char, *mut c_char, *mut *mut c_char) -> c_int;
type StringFn = unsafe extern "C" fn() -> *mut c_char;
type FreeFn = unsafe extern "C" fn(*mut std::ffi::c_void);

/// The library's entry points (from its header, `libpykustomize.h`).
struct Library {
    _lib: libloading::Library,
    build: BuildFn,
    last_error: StringFn,
    free: FreeFn,
    version: StringFn,
}

impl Library {
    fn load(path: &std::path::Path) -> Result<Self, String> {
        // SAFETY: loading runs the library's initialisers (the Go runtime's start); the file is
        // the pinned, checksummed build, and this process exists only to host it.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| format!("cannot load {}: {e}", path.display()))?;
        // SAFETY: the signatures are those of the library's C header.
        unsafe {
            let build = *lib.get::<BuildFn>(b"pykustomize_build\0").map_err(|e| e.to_string())?;
            let last_error = *lib.get::<StringFn>(b"pykustomize_last_error\0").map_err(|e| e.to_string())?;
            let free = *lib.get::<FreeFn>(b"pykustomize_free\0").map_err(|e| e.to_string())?;
            let version = *lib.get::<StringFn>(b"pykustomize_version_string\0").map_err(|e| e.to_string())?;
            Ok(Library { _lib: lib, build, last_error, free, version })
        }
    }

    fn version(&self) -> String {
        // SAFETY: returns a C string (or null) that the library keeps.
        unsafe { c_string((self.version)()) }.unwrap_or_else(|| "unknown".into())
    }

    /// One build; `pykustomize_last_error` is process-global, so builds here are sequential.
    fn build(&self, dir: &[u8]) -> Result<Vec<u8>, String> {
        let path = CString::new(dir).map_err(|_| "the build path holds a NUL byte".to_string())?;
        let options = CString::new(BUILD_OPTIONS).expect("no NUL");
        let mut result: *mut c_char = std::ptr::null_mut();
        // SAFETY: both strings live across the call; the library only reads them and sets
        // `result` to a string we free with its own `pykustomize_free`.
        let status =
            unsafe { (self.build)(path.as_ptr().cast_mut(), options.as_ptr().cast_mut(), &mut result) };
        if status == 0 {
            if result.is_null() {
                return Ok(Vec::new());
            }
            // SAFETY: a NUL-terminated string from the library, freed once, right after copying.
            let bytes = unsafe { CStr::from_ptr(result) }.to_bytes().to_vec();
            unsafe { (self.free)(result.cast()) };
            Ok(bytes)
        } else {
            // SAFETY: the error string belongs to the library (the Python binding never frees it).
            Err(unsafe { c_string((self.last_error)()) }.unwrap_or_else(|| "kustomize failed".into()))
        }
    }
}

/// # Safety
/// `ptr` is null or a NUL-terminated string that stays valid during the call.
unsafe fn c_string(ptr: *const c_char) -> Option<String> {
    (!ptr.is_null()).then(|| CStr::from_ptr(ptr).to_string_lossy().into_owned())
}

/// The worker's main loop; returns the process's exit code. Its stdout carries frames only.
pub fn main(args: &[std::ffi::OsString]) -> i32 {
    // Nothing else of this user (another worker included) may read this worker's memory.
    crate::sandbox::harden_process();
    let Some(library) = args.first() else {
        eprintln!("usage: fluxplan {SUBCOMMAND} LIBRARY");
        return 2;
    };
    // The frames get their own descriptor, and fd 1 becomes stderr, before the library loads: a
    // stray print of the Go code can never corrupt a frame.
    // SAFETY: plain descriptor calls on this process's own standard descriptors.
    let frames = unsafe { libc::dup(1) };
    if frames < 0 || unsafe { libc::dup2(2, 1) } < 0 {
        eprintln!("cannot set up the frame descriptor: {}", std::io::Error::last_os_error());
        return 1;
    }
    // SAFETY: `frames` was just duplicated and is owned by nothing else.
    let mut output =
        std::io::BufWriter::new(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(frames) });
    let library = match Library::load(std::path::Path::new(library)) {
        Ok(library) => library,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    let mut input = std::io::stdin().lock();
    if write_frame(&mut output, HELLO, library.version().as_bytes()).is_err() {
        return 1;
    }
    loop {
        // End of input: the parent is done with this worker (or gone).
        let Ok((tag, len)) = read_header(&mut input) else { return 0 };
        if tag != BUILD || len > 64 * 1024 {
            eprintln!("unexpected request from the parent");
            return 1;
        }
        let mut dir = vec![0u8; len as usize];
        if input.read_exact(&mut dir).is_err() {
            return 0;
        }
        let sent = match library.build(std::ffi::OsStr::from_bytes(&dir).as_bytes()) {
            Ok(yaml) => write_frame(&mut output, OUTPUT, &yaml),
            Err(message) => write_frame(&mut output, ERROR, message.as_bytes()),
        };
        if sent.is_err() {
            return 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_a_short_one_is_an_error() {
        let mut wire = Vec::new();
        write_frame(&mut wire, OUTPUT, b"kind: ConfigMap\n").unwrap();
        write_frame(&mut wire, ERROR, b"").unwrap();
        let mut from = &wire[..];
        assert_eq!(read_header(&mut from).unwrap(), (OUTPUT, 16));
        let mut payload = vec![0u8; 16];
        from.read_exact(&mut payload).unwrap();
        assert_eq!(payload, b"kind: ConfigMap\n");
        assert_eq!(read_header(&mut from).unwrap(), (ERROR, 0));
        assert!(read_header(&mut &[OUTPUT, 0, 0][..]).is_err());
    }
}

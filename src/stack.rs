//! Threads that render and plan get a stack sized for what a repository can nest: the render
//! follows nested kustomizations recursively, and a thread's default 2 MiB overflowed on a chain
//! of 2,000 (an abort, which no error handling catches). The stack is address space reserved,
//! not memory used: pages are only touched as deep as a render goes.

/// 64 MiB: a debug build uses under 4 KiB of stack per nested kustomization, so this holds
/// chains of more than 16,000, far beyond the render's own depth limit.
pub const RENDER_STACK_BYTES: usize = 64 * 1024 * 1024;

/// Runs `work` on a new thread with a render-sized stack and returns what it returns (a panic
/// is passed on); the caller's tracing span goes with it. Fails only when the thread cannot be
/// started.
pub fn on_render_stack<T: Send>(name: &str, work: impl FnOnce() -> T + Send) -> std::io::Result<T> {
    let span = tracing::Span::current();
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .stack_size(RENDER_STACK_BYTES)
            .spawn_scoped(scope, move || span.in_scope(work))?;
        Ok(thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recursion that needs about `depth` KiB of stack.
    fn deep(depth: usize) -> usize {
        let frame = std::hint::black_box([0u8; 1024]);
        if depth == 0 {
            return frame[0] as usize;
        }
        deep(depth - 1) + std::hint::black_box(frame[1]) as usize
    }

    #[test]
    fn work_deeper_than_a_default_thread_stack_runs() {
        // 16 MiB of frames: eight times what a thread gets by default.
        assert_eq!(on_render_stack("deep", || deep(16 * 1024)).unwrap(), 0);
    }
}

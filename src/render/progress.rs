//! The progress line on a terminal's stderr while renders run: one line for the whole process,
//! each render in it named (a plan renders base and head side by side), never in a pipe or a
//! CI log.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One render's part of the line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaneState {
    /// `base`, `head`, or empty for a render that is the only one (`build`).
    pub label: String,
    /// Kustomizations (and other units) rendered so far, from the cache or not.
    pub done: usize,
    pub cached: usize,
    /// The Kustomizations the revision's files define, once they are read.
    pub total: Option<usize>,
    pub running: bool,
}

/// The line for these renders: `rendering base 12/40, head 9/40 Kustomizations (15 from cache)`.
/// A total not known yet is `?`; a count past the files' total (units only renders define) is
/// its own total.
pub fn line(lanes: &[LaneState]) -> String {
    let parts: Vec<String> = lanes
        .iter()
        .map(|lane| {
            let total = lane.total.map_or_else(|| "?".to_string(), |t| t.max(lane.done).to_string());
            let count = format!("{}/{total}", lane.done);
            if lane.label.is_empty() {
                count
            } else {
                format!("{} {count}", lane.label)
            }
        })
        .collect();
    let cached: usize = lanes.iter().map(|l| l.cached).sum();
    let mut text = format!("rendering {} Kustomizations", parts.join(", "));
    if cached > 0 {
        text.push_str(&format!(" ({cached} from cache)"));
    }
    text
}

/// The one progress line of the process, shared by its renders.
pub struct Board {
    /// Each render's part, and the line drawn while one runs.
    state: Mutex<(Vec<LaneState>, Option<indicatif::ProgressBar>)>,
    /// Draws on stderr (a terminal); off in tests, which read `line`.
    draws: bool,
}

impl Board {
    /// A board drawing on stderr, when stderr is a terminal and `--quiet` was not given.
    pub fn for_terminal() -> Option<Arc<Board>> {
        use std::io::IsTerminal;
        (std::io::stderr().is_terminal() && !crate::console::quiet()).then(|| Arc::new(Board::new(true)))
    }

    /// A board that draws nothing (tests read its line).
    pub fn hidden() -> Arc<Board> {
        Arc::new(Board::new(false))
    }

    fn new(draws: bool) -> Self {
        Board { state: Mutex::default(), draws }
    }

    /// The part of the line a render labelled `label` updates.
    pub fn lane(self: &Arc<Self>, label: &str) -> Lane {
        Lane { board: self.clone(), label: label.to_string() }
    }

    /// The line as it stands.
    pub fn line(&self) -> String {
        line(&self.state.lock().unwrap_or_else(|e| e.into_inner()).0)
    }

    /// Changes one render's part and draws the line (under one lock: never an older line last).
    fn update(&self, label: &str, change: impl FnOnce(&mut LaneState)) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (lanes, bar) = &mut *state;
        // In the order of their labels (`base` before `head`), whichever starts first.
        let at = match lanes.binary_search_by(|l| l.label.as_str().cmp(label)) {
            Ok(at) => at,
            Err(at) => {
                lanes.insert(at, LaneState { label: label.to_string(), ..Default::default() });
                at
            }
        };
        change(&mut lanes[at]);
        if !self.draws {
            return;
        }
        let running = lanes.iter().any(|l| l.running);
        match (bar.take(), running) {
            (Some(shown), true) => {
                shown.set_message(line(lanes));
                *bar = Some(shown);
            }
            (None, true) => {
                let shown = indicatif::ProgressBar::new_spinner();
                shown.enable_steady_tick(Duration::from_millis(120));
                shown.set_message(line(lanes));
                *bar = Some(shown);
            }
            // The line as it ends (every count at its total) is drawn before it goes, whatever
            // the redraw rate skipped.
            (Some(shown), false) => {
                shown.finish_with_message(line(lanes));
                shown.finish_and_clear();
            }
            (None, false) => {}
        }
    }
}

/// One render's handle on the board (in `RenderOptions`).
#[derive(Clone)]
pub struct Lane {
    board: Arc<Board>,
    label: String,
}

impl Lane {
    /// The render starts (again: a plan may render head twice): its counts start from zero.
    pub fn start(&self) {
        self.board.update(&self.label, |lane| {
            *lane = LaneState { label: lane.label.clone(), running: true, ..Default::default() }
        });
    }

    /// The Kustomizations the revision's files define.
    pub fn set_total(&self, total: usize) {
        self.board.update(&self.label, |lane| lane.total = Some(total));
    }

    pub fn tick(&self, cache_hit: bool) {
        self.board.update(&self.label, |lane| {
            lane.done += 1;
            lane.cached += usize::from(cache_hit);
        });
    }

    /// The render is over: its numbers stay on the line while other renders run, its total then
    /// what it rendered (units the files define that no root reaches are not rendered; units only
    /// renders define are); the line goes when none runs.
    pub fn finish(&self) {
        self.board.update(&self.label, |lane| {
            lane.running = false;
            lane.total = Some(lane.done);
        });
    }
}

/// What a render counts as it goes (for its log line), and its part of the progress line.
pub(super) struct Progress {
    lane: Option<Lane>,
    pub(super) done: AtomicUsize,
    pub(super) cached: AtomicUsize,
}

impl Progress {
    pub(super) fn new(lane: Option<Lane>) -> Self {
        if let Some(lane) = &lane {
            lane.start();
        }
        Progress { lane, done: AtomicUsize::new(0), cached: AtomicUsize::new(0) }
    }

    /// The Kustomizations the revision's files define.
    pub(super) fn set_total(&self, total: usize) {
        if let Some(lane) = &self.lane {
            lane.set_total(total);
        }
    }

    pub(super) fn tick(&self, cache_hit: bool) {
        self.done.fetch_add(1, Ordering::Relaxed);
        self.cached.fetch_add(usize::from(cache_hit), Ordering::Relaxed);
        if let Some(lane) = &self.lane {
            lane.tick(cache_hit);
        }
    }

    pub(super) fn finish(&self) {
        if let Some(lane) = &self.lane {
            lane.finish();
        }
    }

    /// One Kustomization's render, counted on the line once when it ends, rendered or failed:
    /// the total its files set counts the failures too.
    pub(super) fn unit(&self) -> UnitTick<'_> {
        UnitTick { progress: self, built: None }
    }
}

/// Counts its render when dropped (see `Progress::unit`).
pub(super) struct UnitTick<'a> {
    progress: &'a Progress,
    /// Whether the build came from the cache, once there is one; `None` for a render that failed
    /// before its build, which is no build in the statistics.
    pub(super) built: Option<bool>,
}

impl Drop for UnitTick<'_> {
    fn drop(&mut self) {
        match (self.built, &self.progress.lane) {
            (Some(cache_hit), _) => self.progress.tick(cache_hit),
            (None, Some(lane)) => lane.tick(false),
            (None, None) => {}
        }
    }
}

/// A render that ends, however it ends, leaves the progress line.
impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_each_render_with_its_count_and_total() {
        let board = Board::hidden();
        let (base, head) = (board.lane("base"), board.lane("head"));
        head.start();
        base.start();
        assert_eq!(board.line(), "rendering base 0/?, head 0/? Kustomizations");
        base.set_total(40);
        head.set_total(40);
        for _ in 0..12 {
            base.tick(true);
        }
        for i in 0..9 {
            head.tick(i < 3);
        }
        assert_eq!(board.line(), "rendering base 12/40, head 9/40 Kustomizations (15 from cache)");
        // A render past its files' total (units that only renders define) counts on.
        for _ in 0..30 {
            base.tick(false);
        }
        base.finish();
        assert_eq!(board.line(), "rendering base 42/42, head 9/40 Kustomizations (15 from cache)");
        // A render that ends short of its files' total (Kustomizations no root reaches) ends at
        // what it rendered.
        head.finish();
        assert_eq!(board.line(), "rendering base 42/42, head 9/9 Kustomizations (15 from cache)");
        // Head rendered again: its part starts over, in its place.
        head.start();
        assert_eq!(board.line(), "rendering base 42/42, head 0/? Kustomizations (12 from cache)");
    }

    #[test]
    fn a_single_render_is_not_labelled() {
        let board = Board::hidden();
        let lane = board.lane("");
        lane.start();
        lane.set_total(3);
        lane.tick(false);
        assert_eq!(board.line(), "rendering 1/3 Kustomizations");
    }
}

-- After the merge: the merge-time plan, its prediction, and the rollout follow-up.
-- `version` is bumped by every follow-up write: writers compare and swap on it (optimistic
-- concurrency), so two replicas never overwrite each other's result.
ALTER TABLE runs ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN merge_sha TEXT;
ALTER TABLE runs ADD COLUMN notes TEXT;
ALTER TABLE runs ADD COLUMN prediction TEXT;
ALTER TABLE runs ADD COLUMN followup TEXT;
ALTER TABLE runs ADD COLUMN followup_outcome TEXT;
CREATE INDEX runs_merge ON runs (forge, repo, merge_sha);

-- Jobs with a key (a follow-up's cluster, Kustomization and revision; a merge's commit) exist
-- once: a duplicate collapses into the first. `polls` counts a job's not-yet answers, for its
-- own backoff (reset with the row: forgotten once the job is done).
ALTER TABLE jobs ADD COLUMN dedupe_key TEXT;
ALTER TABLE jobs ADD COLUMN polls BIGINT NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX jobs_dedupe_key ON jobs (dedupe_key);

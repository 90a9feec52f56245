-- An approval binds to the plan its author saw: the run, and the digest of the plan's content.
ALTER TABLE runs ADD COLUMN plan_digest TEXT;
ALTER TABLE approvals ADD COLUMN run_id BIGINT;
ALTER TABLE approvals ADD COLUMN plan_digest TEXT;

-- Replies to commands that were refused or asked for help: one per user, pull request and window.
CREATE TABLE replies (
    forge TEXT NOT NULL,
    repo TEXT NOT NULL,
    pr_number BIGINT NOT NULL,
    username TEXT NOT NULL,
    replied_at BIGINT NOT NULL
);
CREATE INDEX replies_pull ON replies (forge, repo, pr_number, username);

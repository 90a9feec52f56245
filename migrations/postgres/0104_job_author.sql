-- Who opened the pull request a plan is for (GitHub login, GitLab `id:N`), so that one author
-- with many pull requests cannot hold every worker (`store::fair`). NULL for other jobs.
ALTER TABLE jobs ADD COLUMN author TEXT;

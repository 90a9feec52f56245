-- The repository's page on the forge, for the run page's links to the pull request and commits
-- (from the signed payload; runs recorded before have none and show no links).
ALTER TABLE runs ADD COLUMN web_url TEXT;

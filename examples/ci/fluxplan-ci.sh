#!/bin/sh
# Plans a pull or merge request in CI: the text plan in the job log, the markdown in the job
# summary, the JSON and markdown kept as artifacts, and an exit status that gates the merge.
# action.yml (GitHub Actions) and examples/ci/gitlab-ci.yml (GitLab CI) run it; docs/ci.md.
#
# Settings (environment, all optional):
#   FLUXPLAN_CI_BASE     the revision merged into, used as it is. Default: origin/BRANCH at COMMIT
#                        (below): the plan names the branch, so Argo CD Applications and
#                        GitRepositories that track it by name read the tree planned.
#   FLUXPLAN_CI_BASE_BRANCH  the branch merged into. Default: GitLab's
#                        CI_MERGE_REQUEST_TARGET_BRANCH_NAME, GitHub's GITHUB_BASE_REF.
#   FLUXPLAN_CI_BASE_COMMIT  the commit the plan compares with. Default: GitLab: the target
#                        branch's tip in a merged results pipeline, else the merge request's diff
#                        base; GitHub: none (the action passes the pull request's base sha): the
#                        branch's tip, fetched.
#   FLUXPLAN_CI_HEAD     the revision being merged (default HEAD).
#   FLUXPLAN_CI_REPO     the repository's checkout (default .).
#   FLUXPLAN_CI_ARGS     more arguments for `fluxplan plan`, split on blanks (no quoting).
#   FLUXPLAN_CI_FAIL_ON  the verdict from which the job fails: changes, blocked (default),
#                        failed, or never.
#   FLUXPLAN_CI_OUT_DIR  where plan.json, plan.md, code-quality.json and fluxplan.env go
#                        (default fluxplan-report).
#   FLUXPLAN_BIN         the fluxplan to run (default: fluxplan on PATH).
# Exit status: 0 when the job passes, else fluxplan's own (1 changes, 2 blocked, 3 could not plan).
set -eu

say() { printf 'fluxplan-ci: %s\n' "$*" >&2; }

bin=${FLUXPLAN_BIN:-fluxplan}
repo=${FLUXPLAN_CI_REPO:-.}
head=${FLUXPLAN_CI_HEAD:-HEAD}
out_dir=${FLUXPLAN_CI_OUT_DIR:-fluxplan-report}
fail_on=${FLUXPLAN_CI_FAIL_ON:-blocked}

case $fail_on in
  changes | blocked | failed | never) ;;
  *) say "FLUXPLAN_CI_FAIL_ON is '$fail_on': expected changes, blocked, failed or never"; exit 3 ;;
esac

if ! command -v "$bin" >/dev/null 2>&1; then
  say "cannot find '$bin': install fluxplan (examples/ci/install.sh) or set FLUXPLAN_BIN"
  exit 3
fi

git_in() { git -C "$repo" "$@"; }
has_commit() { git_in rev-parse --verify --quiet --end-of-options "$1^{commit}" >/dev/null 2>&1; }
shallow=false
[ "$(git_in rev-parse --is-shallow-repository 2>/dev/null)" = true ] && shallow=true
# A shallow clone (actions/checkout's default, GitLab's GIT_DEPTH) may lack the base: fetch it,
# one commit deep there. fetch WHAT REFSPEC
fetch() {
  if [ "$shallow" = true ]; then
    say "the base $1 is not in this shallow clone: fetching it"
    git_in fetch --quiet --no-tags --depth=1 origin "$2" || say "could not fetch $1"
  else
    say "the base $1 is not in this clone: fetching it"
    git_in fetch --quiet --no-tags origin "$2" || say "could not fetch $1"
  fi
}

# The base. The forge names the branch merged into and the commit to compare with; the plan runs
# against origin/BRANCH set at that commit, so that what tracks the branch by name (an Argo CD
# Application's targetRevision: master) reads the tree planned, and the diff is the request's own
# (a diff base, not a branch tip that moved on since).
base=${FLUXPLAN_CI_BASE:-}
branch=${FLUXPLAN_CI_BASE_BRANCH:-${CI_MERGE_REQUEST_TARGET_BRANCH_NAME:-${GITHUB_BASE_REF:-}}}
commit=${FLUXPLAN_CI_BASE_COMMIT:-${CI_MERGE_REQUEST_TARGET_BRANCH_SHA:-${CI_MERGE_REQUEST_DIFF_BASE_SHA:-}}}
if [ -z "$base" ] && [ -n "$branch" ]; then
  case $branch in
    -* | *[!A-Za-z0-9._/-]*) ok=false ;;
    *) git check-ref-format --branch "$branch" >/dev/null 2>&1 && ok=true || ok=false ;;
  esac
  if [ "$ok" = false ]; then
    say "the base branch '$branch' is not a branch name git accepts: set FLUXPLAN_CI_BASE"
    exit 3
  fi
  tracking=refs/remotes/origin/$branch
  if [ -n "$commit" ]; then
    case $commit in
      *[!0-9a-f]* | '') ok=false ;;
      *) [ ${#commit} -eq 40 ] || [ ${#commit} -eq 64 ] && ok=true || ok=false ;;
    esac
    if [ "$ok" = false ]; then
      say "the base commit '$commit' is not a full commit id: set FLUXPLAN_CI_BASE_COMMIT to one"
      exit 3
    fi
    has_commit "$commit" || fetch "$commit" "$commit"
    # The branch as the forge saw it: whatever origin/BRANCH said before is this job's clone's.
    git_in update-ref "$tracking" "$commit" 2>/dev/null || {
      say "could not point $tracking at the base commit $commit (is it in the clone?)"
      exit 3
    }
  elif ! has_commit "$tracking"; then
    fetch "origin/$branch" "+refs/heads/$branch:$tracking"
  fi
  base=origin/$branch
elif [ -z "$base" ]; then
  base=$commit
fi
if [ -z "$base" ]; then
  say "no base revision: this is not a pull or merge request pipeline; set FLUXPLAN_CI_BASE"
  exit 3
fi

# A base given as it is: fetched when it is a commit id or origin/BRANCH. Revisions such as
# HEAD~1 are left to fluxplan, which says how to fetch them.
if ! has_commit "$base" && [ "$shallow" = true ]; then
  case $base in
    origin/*) fetch "$base" "+refs/heads/${base#origin/}:refs/remotes/$base" ;;
    *[!0-9a-f]*) ;;
    *) fetch "$base" "$base" ;;
  esac
fi

# A job whose user cannot write the checkout (a runner that checks it out as another user, with
# its own umask) stops here with status 3: under `set -e` mkdir's own 1 would read as "changes".
if ! mkdir -p "$out_dir" || [ ! -w "$out_dir" ]; then
  say "cannot write to $out_dir as uid $(id -u): give the job's user write access to it (GitLab:" \
    "the build directory, docs/ci.md) or set FLUXPLAN_CI_OUT_DIR to a directory it can write"
  exit 3
fi
json=$out_dir/plan.json
markdown=$out_dir/plan.md
# GitLab's Code Quality report: each alert on the lines that cause it (docs/locations.md).
code_quality=$out_dir/code-quality.json
# Written anew, never through a link the pull request committed in their place.
rm -f "$json" "$markdown" "$code_quality" "$out_dir/fluxplan.env"

# One plan, four reports: text for the log; JSON, markdown and Code Quality into files.
set -f # FLUXPLAN_CI_ARGS is split on blanks, never globbed
set +e
# shellcheck disable=SC2086
"$bin" plan --repo "$repo" --base "$base" --head "$head" --format text \
  --out "json=$json" --out "markdown=$markdown" --code-quality "$code_quality" ${FLUXPLAN_CI_ARGS:-}
code=$?
set -e
set +f

# The exit status is the verdict only when a plan was written: a crash, a kill or a wrapper that
# exits 2 without one is no blocked plan.
if [ ! -s "$json" ]; then
  say "fluxplan made no plan (exit status $code; its error is above)"
  code=3
fi
case $code in
  0) verdict=no-changes ;;
  1) verdict=changes ;;
  2) verdict=blocked ;;
  *) verdict=failed code=3 ;;
esac

printf 'FLUXPLAN_VERDICT=%s\nFLUXPLAN_EXIT_CODE=%s\n' "$verdict" "$code" >"$out_dir/fluxplan.env"
if [ -n "${GITHUB_OUTPUT:-}" ]; then
  printf 'verdict=%s\nexit-code=%s\njson=%s\nmarkdown=%s\n' "$verdict" "$code" "$json" "$markdown" >>"$GITHUB_OUTPUT"
fi
# GitHub shows at most 1 MiB of a step's summary.
if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -s "$markdown" ]; then
  if [ "$(wc -c <"$markdown")" -le 1000000 ]; then
    cat "$markdown" >>"$GITHUB_STEP_SUMMARY"
  else
    printf '**fluxplan: %s** — the plan is too long for this summary: see the artifact.\n' "$verdict" >>"$GITHUB_STEP_SUMMARY"
  fi
fi

case $fail_on:$verdict in
  never:* | failed:no-changes | failed:changes | failed:blocked | blocked:no-changes | blocked:changes | changes:no-changes)
    exit 0 ;;
esac
say "the plan is $verdict (FLUXPLAN_CI_FAIL_ON=$fail_on)"
exit "$code"

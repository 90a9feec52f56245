#!/bin/sh
# Plans a pull or merge request in CI: the text plan in the job log, the markdown in the job
# summary, the JSON and markdown kept as artifacts, and an exit status that gates the merge.
# action.yml (GitHub Actions) and examples/ci/gitlab-ci.yml (GitLab CI) run it; docs/ci.md.
#
# Settings (environment, all optional):
#   FLUXPLAN_CI_BASE     the revision merged into. Default: GitLab: the target branch's tip in a
#                        merged results pipeline, else the merge request's diff base; GitHub:
#                        origin/$GITHUB_BASE_REF (the action passes the pull request's base sha).
#   FLUXPLAN_CI_HEAD     the revision being merged (default HEAD).
#   FLUXPLAN_CI_REPO     the repository's checkout (default .).
#   FLUXPLAN_CI_ARGS     more arguments for `fluxplan plan`, split on blanks (no quoting).
#   FLUXPLAN_CI_FAIL_ON  the verdict from which the job fails: changes, blocked (default),
#                        failed, or never.
#   FLUXPLAN_CI_OUT_DIR  where plan.json, plan.md and fluxplan.env go (default fluxplan-report).
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

# The base: what each forge says the request merges into.
base=${FLUXPLAN_CI_BASE:-}
if [ -z "$base" ]; then
  if [ -n "${CI_MERGE_REQUEST_TARGET_BRANCH_SHA:-}" ]; then
    # A merged results pipeline: HEAD is the merge, so the target's tip is what it merges into.
    base=$CI_MERGE_REQUEST_TARGET_BRANCH_SHA
  elif [ -n "${CI_MERGE_REQUEST_DIFF_BASE_SHA:-}" ]; then
    base=$CI_MERGE_REQUEST_DIFF_BASE_SHA
  elif [ -n "${CI_MERGE_REQUEST_TARGET_BRANCH_NAME:-}" ]; then
    base=origin/$CI_MERGE_REQUEST_TARGET_BRANCH_NAME
  elif [ -n "${GITHUB_BASE_REF:-}" ]; then
    base=origin/$GITHUB_BASE_REF
  fi
fi
if [ -z "$base" ]; then
  say "no base revision: this is not a pull or merge request pipeline; set FLUXPLAN_CI_BASE"
  exit 3
fi

if ! command -v "$bin" >/dev/null 2>&1; then
  say "cannot find '$bin': install fluxplan (examples/ci/install.sh) or set FLUXPLAN_BIN"
  exit 3
fi

# A shallow clone (actions/checkout's default, GitLab's GIT_DEPTH) may lack the base: fetch that
# one commit. Revisions such as HEAD~1 are left to fluxplan, which says how to fetch them.
git_in() { git -C "$repo" "$@"; }
if ! git_in rev-parse --verify --quiet --end-of-options "$base^{commit}" >/dev/null 2>&1 \
  && [ "$(git_in rev-parse --is-shallow-repository 2>/dev/null)" = true ]; then
  case $base in
    origin/*) refspec="+refs/heads/${base#origin/}:refs/remotes/$base" ;;
    *[!0-9a-f]*) refspec= ;;
    *) refspec=$base ;;
  esac
  if [ -n "$refspec" ]; then
    say "the base $base is not in this shallow clone: fetching it"
    git_in fetch --quiet --no-tags --depth=1 origin "$refspec" || say "could not fetch $base"
  fi
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
# Written anew, never through a link the pull request committed in their place.
rm -f "$json" "$markdown" "$out_dir/fluxplan.env"

# One plan, three reports: text for the log, JSON and markdown into files.
set -f # FLUXPLAN_CI_ARGS is split on blanks, never globbed
set +e
# shellcheck disable=SC2086
"$bin" plan --repo "$repo" --base "$base" --head "$head" --format text \
  --out "json=$json" --out "markdown=$markdown" ${FLUXPLAN_CI_ARGS:-}
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

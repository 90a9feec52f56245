//! Checks the fake forges against the real clients: `octocrab` for GitHub, `gitlab` for GitLab.
//! The call shapes here are the ones the bot can copy.

use crate::fake_github::{FakeGitHub, BOT_LOGIN};
use crate::fake_gitlab::{FakeGitLab, BOT_USERNAME, BOT_USER_ID};
use gitlab::api::{self, AsyncQuery, Pagination};
use octocrab::models::reactions::ReactionContent;
use octocrab::models::{CombinedStatus, StatusState};
use octocrab::service::middleware::retry::RetryConfig;
use octocrab::Octocrab;
use serde::Deserialize;
use serde_json::Value;

const REPO: &str = "acme/fleet";
const CLONE_URL: &str = "file:///tmp/fleet.git";

// ---------------------------------------------------------------------------------------------
// GitHub through octocrab

/// A client with octocrab's default retry policy (`RetryConfig::Simple(3)`: 5xx and 429 are
/// retried at once, up to three times).
fn octocrab(gh: &FakeGitHub) -> Octocrab {
    Octocrab::builder().base_uri(gh.url()).unwrap().personal_token("t").build().unwrap()
}

/// A client that surfaces every error.
fn octocrab_no_retry(gh: &FakeGitHub) -> Octocrab {
    Octocrab::builder()
        .base_uri(gh.url())
        .unwrap()
        .personal_token("t")
        .add_retry_config(RetryConfig::None)
        .build()
        .unwrap()
}

fn github() -> FakeGitHub {
    let gh = FakeGitHub::start();
    gh.add_pull(REPO, 7, "head1", "feature", "main", "base1", CLONE_URL);
    gh
}

/// The HTTP status of an octocrab error answered by the server.
fn github_status(err: &octocrab::Error) -> Option<u16> {
    match err {
        octocrab::Error::GitHub { source, .. } => Some(source.status_code.as_u16()),
        _ => None,
    }
}

#[tokio::test]
async fn github_comments_create_list_update_delete() {
    let gh = github();
    let human = gh.add_issue_comment(REPO, 7, "alice", "/fluxplan plan");
    let octo = octocrab(&gh);
    let issues = octo.issues("acme", "fleet");

    let created = issues.create_comment(7, "plan: 3 deletions").await.unwrap();
    assert_eq!(created.user.login, BOT_LOGIN);
    assert_eq!(created.user.r#type, "Bot");
    assert!(created.id.into_inner() > human);
    for i in 0..3 {
        issues.create_comment(7, format!("extra {i}")).await.unwrap();
    }

    let first = issues.list_comments(7).per_page(2).send().await.unwrap();
    assert_eq!(first.items.len(), 2);
    assert!(first.next.is_some(), "a Link header with rel=next");
    let all = octo.all_pages(first).await.unwrap();
    let bodies: Vec<String> = all.iter().map(|c| c.body.clone().unwrap()).collect();
    assert_eq!(bodies, ["/fluxplan plan", "plan: 3 deletions", "extra 0", "extra 1", "extra 2"]);
    assert_eq!(all[0].user.login, "alice");
    assert!(gh
        .requests()
        .contains(&("GET".into(), "/repos/acme/fleet/issues/7/comments?per_page=2&page=3".into())));

    let updated = issues.update_comment(created.id, "plan: 2 deletions").await.unwrap();
    assert_eq!(updated.body.as_deref(), Some("plan: 2 deletions"));
    assert_eq!(gh.comments(REPO, 7)[1], (created.id.into_inner(), "plan: 2 deletions".to_string()));

    issues.delete_comment(created.id).await.unwrap();
    assert_eq!(gh.comments(REPO, 7).len(), 4);
    let err = issues.delete_comment(created.id).await.unwrap_err();
    assert_eq!(github_status(&err), Some(404));

    // GitHub's limit on comment bodies.
    let err = issues.create_comment(7, "x".repeat(65_537)).await.unwrap_err();
    assert_eq!(github_status(&err), Some(422));
    // Comments need an existing issue or pull request.
    let err = issues.create_comment(8, "nowhere").await.unwrap_err();
    assert_eq!(github_status(&err), Some(404));
}

#[tokio::test]
async fn github_commit_statuses() {
    let gh = github();
    let octo = octocrab(&gh);
    let repos = octo.repos("acme", "fleet");

    let pending = repos
        .create_status("head1".into(), StatusState::Pending)
        .context("fluxplan".into())
        .description("planning".into())
        .target("https://ci.example.com/1".into())
        .send()
        .await
        .unwrap();
    assert_eq!(pending.state, StatusState::Pending);
    assert_eq!(pending.context.as_deref(), Some("fluxplan"));
    assert_eq!(pending.creator.unwrap().login, BOT_LOGIN);
    repos
        .create_status("head1".into(), StatusState::Success)
        .context("fluxplan".into())
        .send()
        .await
        .unwrap();

    let listed = repos.list_statuses("head1".into()).send().await.unwrap();
    let states: Vec<StatusState> = listed.items.iter().map(|s| s.state).collect();
    assert_eq!(states, [StatusState::Success, StatusState::Pending], "newest first");
    let combined: CombinedStatus =
        octo.get("/repos/acme/fleet/commits/head1/status", None::<&()>).await.unwrap();
    assert_eq!((combined.state, combined.total_count), (StatusState::Success, 1));

    let posted = gh.statuses(REPO, "head1");
    assert_eq!(posted.len(), 2);
    assert_eq!(
        (posted[0]["state"].as_str(), posted[0]["target_url"].as_str()),
        (Some("pending"), Some("https://ci.example.com/1"))
    );

    // Unknown commits and long descriptions are refused as on GitHub.
    let err = repos.create_status("nope".into(), StatusState::Pending).send().await.unwrap_err();
    assert_eq!(github_status(&err), Some(422));
    let err = repos
        .create_status("head1".into(), StatusState::Failure)
        .description("d".repeat(141))
        .send()
        .await
        .unwrap_err();
    assert_eq!(github_status(&err), Some(422));
    // A new push makes the new head a known commit.
    gh.set_head(REPO, 7, "head2");
    repos.create_status("head2".into(), StatusState::Pending).send().await.unwrap();
}

#[tokio::test]
async fn github_collaborator_permissions() {
    let gh = github();
    gh.set_permission(REPO, "alice", "admin");
    gh.set_permission(REPO, "bob", "maintain");
    gh.set_permission(REPO, "carol", "none");
    let octo = octocrab(&gh);
    let repos = octo.repos("acme", "fleet");

    let alice = repos.get_contributor_permission("alice").send().await.unwrap();
    assert_eq!(alice.permission, octocrab::params::teams::Permission::Admin);
    assert_eq!(alice.role_name, "admin");
    assert_eq!(alice.user.author.login, "alice");
    assert!(alice.user.permissions.admin && alice.user.permissions.push);

    // octocrab's typed `permission` only knows pull/push/admin/maintain/triage, but GitHub answers
    // the legacy admin/write/read/none: read the body raw.
    let err = repos.get_contributor_permission("bob").send().await.unwrap_err();
    assert!(matches!(err, octocrab::Error::Serde { .. } | octocrab::Error::Json { .. }), "{err:?}");
    let bob: Value = octo.get("/repos/acme/fleet/collaborators/bob/permission", None::<&()>).await.unwrap();
    assert_eq!((bob["permission"].as_str(), bob["role_name"].as_str()), (Some("write"), Some("maintain")));
    assert_eq!(bob["user"]["permissions"]["push"], true);
    let carol: Value =
        octo.get("/repos/acme/fleet/collaborators/carol/permission", None::<&()>).await.unwrap();
    assert_eq!(carol["permission"], "none");

    let err = octo
        .get::<Value, _, _>("/repos/acme/fleet/collaborators/mallory/permission", None::<&()>)
        .await
        .unwrap_err();
    assert_eq!(github_status(&err), Some(404));
}

#[tokio::test]
async fn github_reactions_pulls_and_rate_limit_endpoint() {
    let gh = github();
    let human = gh.add_issue_comment(REPO, 7, "alice", "/fluxplan plan");
    let octo = octocrab(&gh);

    let reaction =
        octo.issues("acme", "fleet").create_comment_reaction(human, ReactionContent::Eyes).await.unwrap();
    assert_eq!(reaction.content, ReactionContent::Eyes);
    assert_eq!(reaction.user.login, BOT_LOGIN);
    octo.issues("acme", "fleet").create_comment_reaction(human, ReactionContent::PlusOne).await.unwrap();
    assert_eq!(gh.reactions(REPO, human), ["eyes", "+1"]);

    let pull = octo.pulls("acme", "fleet").get(7).await.unwrap();
    assert_eq!((pull.number, pull.head.sha.as_str(), pull.head.ref_field.as_str()), (7, "head1", "feature"));
    assert_eq!((pull.base.sha.as_str(), pull.base.ref_field.as_str()), ("base1", "main"));
    let head_repo = pull.head.repo.unwrap();
    assert_eq!(head_repo.full_name.as_deref(), Some(REPO));
    assert_eq!(head_repo.clone_url.unwrap().as_str(), CLONE_URL);
    assert_eq!(pull.user.unwrap().login, "contributor");

    gh.set_head(REPO, 7, "head2");
    assert_eq!(octo.pulls("acme", "fleet").get(7).await.unwrap().head.sha, "head2");
    gh.add_pull(REPO, 9, "head9", "other", "release", "base9", CLONE_URL);
    let open = octo
        .pulls("acme", "fleet")
        .list()
        .state(octocrab::params::State::Open)
        .base("main")
        .send()
        .await
        .unwrap();
    assert_eq!(open.items.iter().map(|p| p.number).collect::<Vec<_>>(), [7]);
    let err = octo.pulls("acme", "fleet").get(8).await.unwrap_err();
    assert_eq!(github_status(&err), Some(404));

    let limits = octo.ratelimit().get().await.unwrap();
    assert_eq!(limits.resources.core.limit, 5000);
}

#[tokio::test]
async fn github_injected_failures() {
    let gh = github();
    let octo = octocrab_no_retry(&gh);

    gh.fail_next(500, 1);
    let err = octo.pulls("acme", "fleet").get(7).await.unwrap_err();
    assert_eq!(github_status(&err), Some(500));
    octo.pulls("acme", "fleet").get(7).await.unwrap();

    gh.rate_limit_next(1, 30);
    let err = octo.issues("acme", "fleet").create_comment(7, "plan").await.unwrap_err();
    let octocrab::Error::GitHub { source, .. } = &err else { panic!("{err:?}") };
    assert_eq!(source.status_code.as_u16(), 429);
    assert!(source.message.contains("rate limit"), "{}", source.message);
    let headers = source.headers.as_ref().unwrap();
    assert_eq!(headers["retry-after"], "30");
    assert_eq!(headers["x-ratelimit-remaining"], "0");
    let reset: u64 = headers["x-ratelimit-reset"].to_str().unwrap().parse().unwrap();
    assert!(reset >= crate::fake_github::unix_now() + 29);
    assert!(gh.comments(REPO, 7).is_empty(), "a refused request changes nothing");
    octo.issues("acme", "fleet").create_comment(7, "plan").await.unwrap();

    // octocrab's default policy retries 5xx and 429 at once: one injected failure goes unseen.
    gh.fail_next(502, 1);
    let before = gh.requests().len();
    octocrab(&gh).pulls("acme", "fleet").get(7).await.unwrap();
    assert_eq!(gh.requests().len(), before + 2);

    let (method, path, body) = gh.requests_with_bodies().into_iter().find(|(m, _, _)| m == "POST").unwrap();
    assert_eq!((method.as_str(), path.as_str()), ("POST", "/repos/acme/fleet/issues/7/comments"));
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["body"], "plan");

    // A hung request is never answered, and only the one asked for hangs.
    gh.hang_next_on("/pulls/7", 1);
    let hung =
        tokio::time::timeout(std::time::Duration::from_secs(2), octo.pulls("acme", "fleet").get(7)).await;
    assert!(hung.is_err(), "answered: {hung:?}");
    assert_eq!(gh.hung(), 1);
    octo.pulls("acme", "fleet").get(7).await.unwrap();
    // A slow answer comes, after its delay.
    gh.answer_slowly_on("/pulls/7", 1, std::time::Duration::from_millis(300));
    let started = std::time::Instant::now();
    octo.pulls("acme", "fleet").get(7).await.unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    // A revoked token: every request is refused until it is given back.
    gh.refuse_token(true);
    let err = octo.pulls("acme", "fleet").get(7).await.unwrap_err();
    assert_eq!(github_status(&err), Some(401));
    gh.refuse_token(false);
    octo.pulls("acme", "fleet").get(7).await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// GitLab through the gitlab crate (no typed models: the caller deserializes into its own structs)

const PROJECT: &str = "acme/fleet";
const PROJECT_ID: u64 = 42;

#[derive(Debug, Deserialize)]
struct GlUser {
    id: u64,
    username: String,
}

#[derive(Debug, Deserialize)]
struct GlNote {
    id: u64,
    body: String,
    author: GlUser,
    created_at: String,
}

#[derive(Debug, Deserialize)]
struct GlStatus {
    id: u64,
    status: String,
    name: String,
    sha: String,
    #[serde(rename = "ref")]
    git_ref: Option<String>,
    target_url: Option<String>,
}

#[derive(Debug, Deserialize)]
struct GlMember {
    id: u64,
    username: String,
    access_level: u64,
}

#[derive(Debug, Deserialize)]
struct GlMergeRequest {
    iid: u64,
    project_id: u64,
    sha: String,
    source_branch: String,
    target_branch: String,
    state: String,
    web_url: String,
    author: GlUser,
}

#[derive(Debug, Deserialize)]
struct GlAward {
    name: String,
    user: GlUser,
}

/// The gitlab crate has no endpoint deleting a merge request note; this is one.
struct DeleteMergeRequestNote {
    project: String,
    merge_request: u64,
    note: u64,
}

impl api::Endpoint for DeleteMergeRequestNote {
    fn method(&self) -> api::endpoint_prelude::Method {
        api::endpoint_prelude::Method::DELETE
    }

    fn endpoint(&self) -> std::borrow::Cow<'static, str> {
        let project = self.project.replace('/', "%2F");
        format!("projects/{project}/merge_requests/{}/notes/{}", self.merge_request, self.note).into()
    }
}

async fn gitlab_client(gl: &FakeGitLab) -> gitlab::AsyncGitlab {
    gitlab::GitlabBuilder::new(gl.host(), "token").insecure().build_async().await.unwrap()
}

fn gitlab() -> FakeGitLab {
    let gl = FakeGitLab::start();
    gl.add_merge_request(
        PROJECT,
        PROJECT_ID,
        3,
        "head1",
        "feature",
        "main",
        "http://git.example.com/acme/fleet.git",
    );
    gl
}

/// The HTTP status of a gitlab-crate error answered by the server with a JSON message.
fn gitlab_status<E: std::error::Error + Send + Sync + 'static>(err: &api::ApiError<E>) -> Option<u16> {
    match err {
        api::ApiError::GitlabWithStatus { status, .. } => Some(status.as_u16()),
        api::ApiError::GitlabService { status, .. } => Some(status.as_u16()),
        _ => None,
    }
}

#[tokio::test]
async fn gitlab_notes_create_list_edit_delete_award() {
    use gitlab::api::projects::merge_requests::notes::{
        awards::CreateMergeRequestNoteAward, CreateMergeRequestNote, EditMergeRequestNote, MergeRequestNotes,
    };
    let gl = gitlab();
    let client = gitlab_client(&gl).await;
    // The gitlab crate ends every path with "?" (an empty query string).
    assert_eq!(gl.requests()[0], ("GET".to_string(), "/api/v4/user?".to_string()));
    let human = gl.add_note(PROJECT, 3, 1001, "alice", "/fluxplan plan");

    let create = CreateMergeRequestNote::builder()
        .project(PROJECT)
        .merge_request(3)
        .body("plan: 3 deletions")
        .build()
        .unwrap();
    let note: GlNote = create.query_async(&client).await.unwrap();
    assert_eq!((note.author.id, note.author.username.as_str()), (BOT_USER_ID, BOT_USERNAME));
    assert!(note.created_at.ends_with('Z'));
    assert_eq!(gl.requests().last().unwrap().1, "/api/v4/projects/acme%2Ffleet/merge_requests/3/notes?");

    // 150 more notes: Pagination::All reads pages of 100, newest first (GitLab's default order).
    for i in 0..150 {
        gl.add_note(PROJECT, 3, 1001, "alice", &format!("note {i}"));
    }
    let list = MergeRequestNotes::builder().project(PROJECT_ID).merge_request(3).build().unwrap();
    let notes: Vec<GlNote> = api::paged(list, Pagination::All).query_async(&client).await.unwrap();
    assert_eq!(notes.len(), 152);
    assert_eq!((notes[0].body.as_str(), notes[151].id), ("note 149", human));
    let pages: Vec<String> =
        gl.requests().into_iter().map(|(_, p)| p).filter(|p| p.contains("/notes?per_page")).collect();
    assert_eq!(pages.len(), 2, "{pages:?}");
    assert!(pages[1].ends_with("per_page=100&page=2"), "{pages:?}");

    let edit = EditMergeRequestNote::builder()
        .project(PROJECT)
        .merge_request(3)
        .note(note.id)
        .body("plan: 2 deletions")
        .build()
        .unwrap();
    let edited: GlNote = edit.query_async(&client).await.unwrap();
    assert_eq!(edited.body, "plan: 2 deletions");
    assert_eq!(gl.notes(PROJECT, 3)[1], (note.id, "plan: 2 deletions".to_string()));
    // Only the author may edit a note.
    let edit_human = EditMergeRequestNote::builder()
        .project(PROJECT)
        .merge_request(3)
        .note(human)
        .body("x")
        .build()
        .unwrap();
    let err = api::ignore(edit_human).query_async(&client).await.unwrap_err();
    assert_eq!(gitlab_status(&err), Some(403));

    let award = CreateMergeRequestNoteAward::builder()
        .project(PROJECT)
        .merge_request(3)
        .note(human)
        .name("eyes")
        .build()
        .unwrap();
    let award: GlAward = award.query_async(&client).await.unwrap();
    assert_eq!((award.name.as_str(), award.user.id), ("eyes", BOT_USER_ID));
    assert_eq!(gl.award_emoji(PROJECT, 3, human), ["eyes"]);

    let delete = DeleteMergeRequestNote { project: PROJECT.into(), merge_request: 3, note: note.id };
    api::ignore(delete).query_async(&client).await.unwrap();
    assert_eq!(gl.notes(PROJECT, 3).len(), 151);
    let delete = DeleteMergeRequestNote { project: PROJECT.into(), merge_request: 3, note: note.id };
    let err = api::ignore(delete).query_async(&client).await.unwrap_err();
    assert_eq!(gitlab_status(&err), Some(404));
}

#[tokio::test]
async fn gitlab_commit_statuses() {
    use gitlab::api::projects::repository::commits::{CommitStatusState, CommitStatuses, CreateCommitStatus};
    let gl = gitlab();
    let client = gitlab_client(&gl).await;
    let post = |state: CommitStatusState| {
        CreateCommitStatus::builder()
            .project(PROJECT)
            .commit("head1")
            .state(state)
            .name("fluxplan")
            .description("plan")
            .target_url("https://ci.example.com/1")
            .build()
            .unwrap()
    };

    let pending: GlStatus = post(CommitStatusState::Pending).query_async(&client).await.unwrap();
    assert_eq!(
        (pending.status.as_str(), pending.name.as_str(), pending.sha.as_str()),
        ("pending", "fluxplan", "head1")
    );
    assert_eq!(pending.git_ref.as_deref(), Some("feature"));
    assert_eq!(pending.target_url.as_deref(), Some("https://ci.example.com/1"));
    let body = gl.requests_with_bodies().pop().unwrap().2;
    assert!(body.contains("state=pending") && body.contains("name=fluxplan"), "form-urlencoded: {body}");

    // GitLab refuses pending -> pending for the same name and ref.
    let err = api::ignore(post(CommitStatusState::Pending)).query_async(&client).await.unwrap_err();
    assert_eq!(gitlab_status(&err), Some(400));
    assert!(err.to_string().contains("Cannot transition status via :enqueue from :pending"), "{err}");
    let success: GlStatus = post(CommitStatusState::Success).query_async(&client).await.unwrap();
    assert!(success.id > pending.id);

    let list = CommitStatuses::builder().project(PROJECT_ID).commit("head1").build().unwrap();
    let latest: Vec<GlStatus> = api::paged(list, Pagination::All).query_async(&client).await.unwrap();
    assert_eq!(latest.iter().map(|s| s.status.as_str()).collect::<Vec<_>>(), ["success"]);
    let all = CommitStatuses::builder().project(PROJECT_ID).commit("head1").all(true).build().unwrap();
    let all: Vec<GlStatus> = api::paged(all, Pagination::All).query_async(&client).await.unwrap();
    assert_eq!(all.len(), 2);
    let posted = gl.statuses(PROJECT, "head1");
    assert_eq!(
        (posted[0]["status"].as_str(), posted[1]["status"].as_str()),
        (Some("pending"), Some("success"))
    );

    let unknown = CreateCommitStatus::builder()
        .project(PROJECT)
        .commit("nope")
        .state(CommitStatusState::Pending)
        .build()
        .unwrap();
    let err = api::ignore(unknown).query_async(&client).await.unwrap_err();
    assert_eq!(gitlab_status(&err), Some(404));
    gl.set_head(PROJECT, 3, "head2");
    let _: GlStatus = CreateCommitStatus::builder()
        .project(PROJECT_ID)
        .commit("head2")
        .state(CommitStatusState::Running)
        .build()
        .unwrap()
        .query_async(&client)
        .await
        .unwrap();
}

#[tokio::test]
async fn gitlab_members_and_merge_requests() {
    use gitlab::api::projects::members::AllProjectMember;
    use gitlab::api::projects::merge_requests::{MergeRequest, MergeRequestState, MergeRequests};
    let gl = gitlab();
    gl.set_access_level(PROJECT, 1001, "alice", 40);
    let client = gitlab_client(&gl).await;

    let member: GlMember = AllProjectMember::builder()
        .project(PROJECT)
        .user(1001)
        .build()
        .unwrap()
        .query_async(&client)
        .await
        .unwrap();
    assert_eq!((member.id, member.username.as_str(), member.access_level), (1001, "alice", 40));
    let err = api::ignore(AllProjectMember::builder().project(PROJECT).user(1002).build().unwrap())
        .query_async(&client)
        .await
        .unwrap_err();
    assert_eq!(gitlab_status(&err), Some(404));

    let mr: GlMergeRequest = MergeRequest::builder()
        .project(PROJECT)
        .merge_request(3)
        .build()
        .unwrap()
        .query_async(&client)
        .await
        .unwrap();
    assert_eq!(
        (mr.iid, mr.project_id, mr.sha.as_str(), mr.state.as_str()),
        (3, PROJECT_ID, "head1", "opened")
    );
    assert_eq!((mr.source_branch.as_str(), mr.target_branch.as_str()), ("feature", "main"));
    assert_eq!(mr.web_url, format!("{}/acme/fleet/-/merge_requests/3", gl.url()));
    assert_eq!(mr.author.username, "contributor");
    gl.set_head(PROJECT, 3, "head2");
    let mr: GlMergeRequest = MergeRequest::builder()
        .project(PROJECT_ID)
        .merge_request(3)
        .build()
        .unwrap()
        .query_async(&client)
        .await
        .unwrap();
    assert_eq!(mr.sha, "head2");

    gl.add_merge_request(
        PROJECT,
        PROJECT_ID,
        4,
        "head4",
        "other",
        "release",
        "http://git.example.com/acme/fleet.git",
    );
    let open = MergeRequests::builder()
        .project(PROJECT)
        .state(MergeRequestState::Opened)
        .target_branch("main")
        .build()
        .unwrap();
    let open: Vec<GlMergeRequest> = api::paged(open, Pagination::All).query_async(&client).await.unwrap();
    assert_eq!(open.iter().map(|m| m.iid).collect::<Vec<_>>(), [3]);

    let project: Value = gitlab::api::projects::Project::builder()
        .project(PROJECT_ID)
        .build()
        .unwrap()
        .query_async(&client)
        .await
        .unwrap();
    assert_eq!(project["path_with_namespace"], PROJECT);
    assert_eq!(project["http_url_to_repo"], "http://git.example.com/acme/fleet.git");
}

#[tokio::test]
async fn gitlab_injected_failures() {
    use gitlab::api::projects::merge_requests::notes::CreateMergeRequestNote;
    let gl = gitlab();
    // Building a client calls GET /user, so it sees injected failures too.
    gl.fail_next(503, 1);
    assert!(gitlab::GitlabBuilder::new(gl.host(), "token").insecure().build_async().await.is_err());
    let client = gitlab_client(&gl).await;
    let note =
        || CreateMergeRequestNote::builder().project(PROJECT).merge_request(3).body("plan").build().unwrap();

    gl.fail_next(500, 1);
    let err = note().query_async(&client).await.map(|_: Value| ()).unwrap_err();
    assert_eq!(gitlab_status(&err), Some(500));
    let _: Value = note().query_async(&client).await.unwrap();

    gl.rate_limit_next(1, 30);
    let err = note().query_async(&client).await.map(|_: Value| ()).unwrap_err();
    match err {
        api::ApiError::GitlabRateLimited { retry_after, rl_remaining, .. } => {
            assert_eq!((retry_after.as_secs(), rl_remaining), (30, 0));
        }
        other => panic!("expected a rate limit: {other:?}"),
    }
    assert_eq!(gl.notes(PROJECT, 3).len(), 1, "a refused request changes nothing");

    // Without a token GitLab answers 401.
    let anonymous = bare_get(&gl.host(), "/api/v4/projects/42");
    assert!(anonymous.starts_with("HTTP/1.1 401"), "{anonymous}");
}

/// A bare HTTP/1.1 GET without credentials (blocking; the fake runs on its own thread).
fn bare_get(host: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

//! The page's client API, run natively against psikit's filter server
//! (each request carried to `Router::respond`, as a WebSocket would carry
//! it): it finds the true matches, keeps its filter across visits
//! (`saved`), follows an update with a delta, and starts over from a
//! damaged copy. The browser tests (web/test) run the same API compiled
//! to WebAssembly; error paths are tested there (a `JsError` needs a
//! JavaScript engine).

use std::sync::Arc;

use psikit_protocols::common::Limits;
use psikit_protocols::filter_psi::{tags_for_items, FilterConfig, FilterService, ServerState};
use psikit_protocols::io::Item;
use psikit_protocols::oprf::ServerKey;
use psikit_protocols::service::{Router, ServerLimits};
use psikit_wasm::{Client, Items, Query};

fn emails(range: std::ops::Range<usize>) -> String {
    range.map(|i| format!("user{i}@example.com\n")).collect()
}

/// The tags of `lines` as the server's set-up computes them.
fn tags(key: &ServerKey, lines: &str) -> Vec<[u8; 16]> {
    let items = Items::from_lines(lines, "trim,lower").expect("items");
    let items: Vec<Item> = (0..items.length())
        .map(|i| Item {
            key: items.key(i).expect("key"),
            row: i as u64 + 1,
        })
        .collect();
    tags_for_items(key, &items).expect("tags")
}

fn router(state: ServerState) -> Router {
    let mut router = Router::new(ServerLimits::default());
    let service = FilterService::new(state, ServerLimits::default());
    router.register(Arc::new(service)).expect("register");
    router
}

/// Runs `query` to its end against `router`; the result's matches.
fn run(rt: &tokio::runtime::Runtime, router: &Router, mut query: Query) -> (Vec<u8>, String) {
    while !query.advance() {
        let request = query.take_outgoing();
        assert!(!request.is_empty(), "a waiting client has sent a request");
        query.push(&rt.block_on(router.respond(&request, Limits::default())));
    }
    // A download, if there was one, is reported to its end.
    assert_eq!(query.downloaded(), query.download_total());
    let result = query.result().expect("the query succeeds");
    match result.sync_kind().as_str() {
        "up-to-date" => assert_eq!(query.download_total(), 0.0),
        _ => assert_eq!(query.download_total(), result.filter_bytes()),
    }
    (result.matches(), result.sync_kind())
}

#[test]
fn a_page_finds_the_matches_keeps_its_filter_and_follows_updates() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("dir");
    // The server holds user0..user1999, keyed as `--normalize trim,lower`.
    let key = ServerKey::generate(&mut rand::rngs::OsRng);
    let server = tags(&key, &emails(0..2000));
    let (mut state, _) = ServerState::build(key, server, FilterConfig::default()).expect("state");
    state.set_key_format(
        Items::from_lines("", "trim,lower")
            .expect("items")
            .key_format(),
    );
    state.save(dir.path()).expect("save");

    // Contacts written as people write them: case and spaces differ.
    let contacts: String = (1990..2010)
        .map(|i| format!("  User{i}@Example.COM \n"))
        .collect();
    let items = Items::from_lines(&contacts, "trim,lower").expect("items");
    let truth: Vec<u8> = (1990..2010).map(|i| u8::from(i < 2000)).collect();

    let first = Client::new(None, 64);
    let router1 = router(ServerState::load(dir.path()).expect("load"));
    let (found, kind) = run(&rt, &router1, first.query(&items).expect("query"));
    assert_eq!((found, kind.as_str()), (truth.clone(), "full"));
    let saved = first.saved().expect("saved").expect("a filter");

    // A returning visitor: nothing to download.
    let again = Client::new(Some(saved.clone()), 64);
    assert!(again.discarded().is_none());
    let (found, kind) = run(&rt, &router1, again.query(&items).expect("query"));
    assert_eq!((found, kind.as_str()), (truth, "up-to-date"));

    // The server adds user2000..2004 and removes user1990: a delta.
    let mut updated = ServerState::load(dir.path()).expect("load");
    let add = tags(updated.key(), &emails(2000..2005));
    let remove = tags(updated.key(), &emails(1990..1991));
    updated.update(add, remove).expect("update");
    let router2 = router(updated);
    let truth: Vec<u8> = (1990..2010)
        .map(|i| u8::from(i != 1990 && i < 2005))
        .collect();
    let (found, kind) = run(&rt, &router2, again.query(&items).expect("query"));
    assert_eq!((found, kind.as_str()), (truth.clone(), "delta"));

    // A damaged copy is set aside and the filter downloaded again.
    let mut damaged = saved;
    let last = damaged.len() - 1;
    damaged[last] ^= 1;
    let fresh = Client::new(Some(damaged), 64);
    assert!(fresh.discarded().is_some());
    let (found, kind) = run(&rt, &router2, fresh.query(&items).expect("query"));
    assert_eq!((found, kind.as_str()), (truth, "full"));
}

#[test]
fn csv_and_lines_give_the_cli_s_items() {
    let csv = "name,email\nAda,  Ada@Example.org \nBob,\nCy,cy@example.org\n";
    let items = Items::from_csv(csv.as_bytes(), "email", "trim,lower", true).expect("csv");
    assert_eq!(items.length(), 2);
    assert_eq!(items.skipped(), 1.0, "the empty key is skipped");
    assert_eq!(items.key(0).expect("key"), b"ada@example.org");
    assert_eq!(items.shown(0).expect("row"), "Ada,   Ada@Example.org ");
    let lines =
        Items::from_lines("  Ada@Example.org \n\ncy@example.org\r\n", "trim,lower").expect("lines");
    assert_eq!(lines.length(), 2);
    assert_eq!(lines.key(0), items.key(0));
    assert_eq!(lines.key(1), items.key(1));
    assert_eq!(lines.key_format(), items.key_format());
}

#[test]
fn the_oprf_self_test_passes() {
    assert_eq!(psikit_wasm::self_test_failure(), None);
}

//! Table and property tests for the work digest: every exact example the original gave for its
//! `digest.ts`, `work.ts` and `todo.ts` (docs/architecture.md#the-original-module-by-module), the
//! section order of docs/decisions.md#decision-2-the-digests-section-order, and the rules this
//! implementation adds (C-style path unquoting, strict numstat counts, fence pairing, redaction
//! before collapsing).

use guest::core::digest::{DigestInput, DigestOptions, build_work_digest};
use guest::core::todo::{Todo, extract_markdown_todos, strip_markdown_todos};
use guest::core::work::{
    FileChange, extract_test_summary, is_test_command, normalize_git_path, parse_git_branch,
    parse_git_numstat, summarize_test_run,
};
use proptest::prelude::*;

fn change(path: &str, added: u64, removed: u64) -> FileChange {
    FileChange {
        path: path.to_string(),
        added,
        removed,
    }
}

fn todo(text: &str, done: bool) -> Todo {
    Todo {
        text: text.to_string(),
        done,
    }
}

fn some(text: &str) -> Option<String> {
    Some(text.to_string())
}

// work.ts: normalizeGitPath

#[test]
fn normalize_git_path_table() {
    let rows = [
        ("src/core/chunk.ts", "src/core/chunk.ts"),
        ("\"src/with space.ts\"", "src/with space.ts"),
        ("src/{core => kernel}/chunk.ts", "src/kernel/chunk.ts"),
        ("src/a.ts => src/b.ts", "src/b.ts"),
        ("src/{old.ts => new.ts}", "src/new.ts"),
        ("a/{b =>   c}/d", "a/c/d"),
        ("  padded.ts \r", "padded.ts"),
        // Git writes non-ASCII bytes as octal escapes inside quotes.
        (r#""caf\303\251.txt""#, "café.txt"),
        // Each side of a rename is quoted on its own.
        (r#""caf\303\251.txt" => "th\303\251.txt""#, "thé.txt"),
        (r#""a\"b.txt""#, r#"a"b.txt"#),
        // A brace rename out of or into a directory.
        ("src/{old => }/x.ts", "src/x.ts"),
        ("src/{ => new}/x.ts", "src/new/x.ts"),
        // Braces without an arrow are part of a name.
        ("{a}.txt => b.txt", "b.txt"),
        ("", ""),
        ("\"", "\""),
    ];
    for (raw, expected) in rows {
        assert_eq!(normalize_git_path(raw), expected, "{raw:?}");
    }
}

// work.ts: parseGitNumstat

const NUMSTAT: &str = "12\t3\tsrc/a.ts\n0\t5\tsrc/b.ts\n-\t-\tassets/logo.png\n4\t4\tsrc/c.ts";

#[test]
fn parse_git_numstat_table() {
    let long_path = "p".repeat(201);
    let longest_path = "p".repeat(200);
    let long_line = format!("1\t1\t{long_path}");
    let longest_line = format!("1\t1\t{longest_path}");
    let rows: Vec<(&str, Option<usize>, Vec<FileChange>)> = vec![
        ("12\t3\tsrc/a.ts", None, vec![change("src/a.ts", 12, 3)]),
        (
            "-\t-\tassets/logo.png",
            None,
            vec![change("assets/logo.png", 0, 0)],
        ),
        (
            NUMSTAT,
            None,
            vec![
                change("src/a.ts", 12, 3),
                change("src/c.ts", 4, 4),
                change("src/b.ts", 0, 5),
                change("assets/logo.png", 0, 0),
            ],
        ),
        (
            NUMSTAT,
            Some(2),
            vec![change("src/a.ts", 12, 3), change("src/c.ts", 4, 4)],
        ),
        (NUMSTAT, Some(0), vec![]),
        ("", None, vec![]),
        ("\n \n", None, vec![]),
        (
            "not a numstat line\n12\t3\tsrc/a.ts",
            None,
            vec![change("src/a.ts", 12, 3)],
        ),
        ("x\ty\tsrc/a.ts", None, vec![]),
        (
            "1\t1\tsrc/{a => b}/file.ts",
            None,
            vec![change("src/b/file.ts", 1, 1)],
        ),
        (
            "1\t1\tsrc/my file.ts",
            None,
            vec![change("src/my file.ts", 1, 1)],
        ),
        // CRLF output (git on Windows through a pipe).
        (
            "1\t0\tb.ts\r\n12\t3\tsrc/a.ts\r\n",
            None,
            vec![change("src/a.ts", 12, 3), change("b.ts", 1, 0)],
        ),
        // Equal churn keeps git's order.
        (
            "1\t1\tfirst\n2\t0\tsecond\n0\t2\tthird",
            None,
            vec![
                change("first", 1, 1),
                change("second", 2, 0),
                change("third", 0, 2),
            ],
        ),
        // Counts git never prints are not counts.
        ("\t\tpath", None, vec![]),
        ("+5\t1\tpath", None, vec![]),
        ("1e3\t0\tpath", None, vec![]),
        ("-5\t0\tpath", None, vec![]),
        (" 5\t0\tpath", None, vec![]),
        ("99999999999999999999\t0\tpath", None, vec![]),
        ("1\t1\t", None, vec![]),
        ("1\t1\t  ", None, vec![]),
        ("1\t1", None, vec![]),
        // A tab inside the path field belongs to the path.
        ("1\t1\ta\tb", None, vec![change("a\tb", 1, 1)]),
        (&long_line, None, vec![]),
        (&longest_line, None, vec![change(&longest_path, 1, 1)]),
        (
            "18446744073709551615\t18446744073709551615\tbig\n1\t0\tsmall",
            None,
            vec![change("big", u64::MAX, u64::MAX), change("small", 1, 0)],
        ),
    ];
    for (output, max, expected) in rows {
        assert_eq!(
            parse_git_numstat(output, max),
            expected,
            "{output:?} {max:?}"
        );
    }
}

// work.ts: parseGitBranch

#[test]
fn parse_git_branch_table() {
    let long = "b".repeat(250);
    let capped = "b".repeat(200);
    let rows = [
        ("feat/core\n", Some("feat/core")),
        ("  main\r\n", Some("main")),
        ("HEAD\n", None),
        ("", None),
        ("   \n", None),
        (long.as_str(), Some(capped.as_str())),
    ];
    for (output, expected) in rows {
        assert_eq!(parse_git_branch(output).as_deref(), expected, "{output:?}");
    }
}

// work.ts: isTestCommand

#[test]
fn is_test_command_recognises_every_family() {
    let commands = [
        "npm test",
        "npm run test",
        "npm run test:unit",
        "pnpm test",
        "yarn test",
        "bun test",
        "bun run test",
        "CI=1 npm test -- --silent",
        "npx vitest run",
        "jest --watch",
        "mocha spec/",
        "ava",
        "jasmine",
        "karma start",
        "tap test/*.js",
        "pytest -q",
        "py.test tests",
        "tox -e py312",
        "nox -s tests",
        "python -m pytest tests/",
        "python3.12 -m unittest discover",
        "go test ./...",
        "cargo test -p guest",
        "rspec",
        "bundle exec rake test",
        "vendor/bin/phpunit",
        "dotnet test",
        "./gradlew test",
        "gradle clean test",
        "mvn -q test",
        "maven test",
        "make test",
        "cd web && npm test",
    ];
    for command in commands {
        assert!(is_test_command(command), "{command}");
    }
}

#[test]
fn is_test_command_rejects_near_misses() {
    let commands = [
        "ls -la",
        "git status",
        "npm run build",
        "npm install",
        "cat test.txt",
        "npm run testing",
        "npm tests",
        "go build ./...",
        "go vet ./...",
        "cargo build",
        "cargo testify",
        "make",
        "make tests",
        "gradle build",
        "mvn package",
        "pytester",
        "jester",
        "echo latest contest",
        "python -m pip list",
        "dotnet build",
        "",
    ];
    for command in commands {
        assert!(!is_test_command(command), "{command}");
    }
}

// work.ts: extractTestSummary

#[test]
fn extract_test_summary_table() {
    let rows = [
        (
            " Test Files  17 passed (17)\n      Tests  312 passed (312)",
            Some("312 passed"),
        ),
        (
            "      Tests  312 passed (312)\r\n   Duration  1.2s\r\n",
            Some("312 passed"),
        ),
        ("Tests  312 passed (312)", Some("312 passed")),
        (
            "      Tests  2 failed | 310 passed (312)",
            Some("2 failed | 310 passed"),
        ),
        (
            "Tests:       2 failed, 10 passed, 12 total",
            Some("2 failed, 10 passed, 12 total"),
        ),
        (
            "test result: ok. 12 passed; 0 failed; 0 ignored",
            Some("12 passed, 0 failed"),
        ),
        (
            "running 4 tests\ntest result: FAILED. 3 passed; 1 failed; 0 ignored",
            Some("3 passed, 1 failed"),
        ),
        (
            "===== 5 passed, 1 failed in 0.12s =====",
            Some("5 passed, 1 failed"),
        ),
        (
            "========== 5 passed, 1 failed in 0.12s ==========",
            Some("5 passed, 1 failed"),
        ),
        ("=== 3 skipped in 1.50s ===", Some("3 skipped")),
        ("ok  \tgithub.com/x/y\t0.512s", Some("ok")),
        ("FAIL\tgithub.com/x/y\t0.010s", Some("failed")),
        (
            "--- FAIL: TestX\nFAIL\tgithub.com/x/y\t0.010s",
            Some("failed"),
        ),
        ("FAIL\nFAIL\tgithub.com/x/y\t0.010s", Some("failed")),
        (
            "TEST RESULT: FAILED. 0 passed; 2 failed",
            Some("0 passed, 2 failed"),
        ),
        ("ok\n", None),
        // The vitest/jest line wins over a go-looking line before it.
        ("ok pkg\n      Tests  5 passed (5)", Some("5 passed")),
        // Near misses.
        (" Test Files  17 passed (17)", None),
        ("Tests:", None),
        ("okay then", None),
        ("all good", None),
        ("", None),
    ];
    for (output, expected) in rows {
        assert_eq!(
            extract_test_summary(output).as_deref(),
            expected,
            "{output:?}"
        );
    }
}

#[test]
fn extract_test_summary_caps_at_120_characters() {
    let long = format!("Tests: {}", "9 passed, ".repeat(40));
    let expected = format!("{}9 passed,…", "9 passed, ".repeat(11));
    let summary = extract_test_summary(&long);
    assert_eq!(summary.as_deref(), Some(expected.as_str()));
    assert_eq!(expected.chars().count(), 120);
}

// work.ts: summarizeTestRun

#[test]
fn summarize_test_run_table() {
    let long_command = format!("npm   test   {}", "--flag ".repeat(12));
    let rows = [
        ("ls -la", false, "", None),
        ("ls -la", true, "Tests  312 passed (312)", None),
        (
            "npm test",
            false,
            "Tests  312 passed (312)",
            Some("npm test — 312 passed"),
        ),
        (
            "npm test",
            true,
            "Tests  2 failed | 310 passed (312)",
            Some("npm test — 2 failed | 310 passed"),
        ),
        ("go test ./...", false, "", Some("go test ./... — ok")),
        ("go test ./...", true, "", Some("go test ./... — failed")),
        ("cargo  test\n", false, "", Some("cargo test — ok")),
        (
            long_command.as_str(),
            false,
            "",
            Some("npm test --flag --flag --flag --flag --flag --flag --flag -… — ok"),
        ),
    ];
    for (command, failed, output, expected) in rows {
        assert_eq!(
            summarize_test_run(command, failed, output).as_deref(),
            expected,
            "{command:?}"
        );
    }
}

// todo.ts: extractMarkdownTodos

#[test]
fn extract_markdown_todos_table() {
    let many = (0..30)
        .map(|i| format!("- [ ] task {i}"))
        .collect::<Vec<_>>()
        .join("\n");
    let rows: Vec<(&str, usize, usize, Vec<Todo>)> = vec![
        (
            "- [ ] write tests\n- [x] ship it",
            20,
            120,
            vec![todo("write tests", false), todo("ship it", true)],
        ),
        (
            "  * [X] nested\n\t+ [ ] tabbed",
            20,
            120,
            vec![todo("nested", true), todo("tabbed", false)],
        ),
        (
            "# Heading\nplain text\n- a bullet without a box",
            20,
            120,
            vec![],
        ),
        (
            "- [ ]   fix   the   bug  ",
            20,
            120,
            vec![todo("fix the bug", false)],
        ),
        (
            &many,
            5,
            120,
            vec![
                todo("task 0", false),
                todo("task 1", false),
                todo("task 2", false),
                todo("task 3", false),
                todo("task 4", false),
            ],
        ),
        (&many, 0, 120, vec![]),
        ("", 20, 120, vec![]),
        ("```\n- [ ] not a task\n```", 20, 120, vec![]),
        (
            "~~~md\n- [ ] not a task\n~~~\n- [x] after",
            20,
            120,
            vec![todo("after", true)],
        ),
        // A fence closes only with the character that opened it.
        (
            "```\n~~~\n- [ ] still code\n```\n- [ ] after",
            20,
            120,
            vec![todo("after", false)],
        ),
        (
            "- [ ] a\r\n- [x] b\r\n",
            20,
            120,
            vec![todo("a", false), todo("b", true)],
        ),
        (
            "-[ ] no space\n- [ ]x glued\n- [ ]\n- [ ]    \n- [y] other\n1. [ ] numbered",
            20,
            120,
            vec![],
        ),
        ("- [ ] abcdef", 20, 6, vec![todo("abcdef", false)]),
        ("- [ ] abcdefg", 20, 6, vec![todo("abcde…", false)]),
        ("- [ ] abc", 20, 0, vec![todo("", false)]),
    ];
    for (text, max, max_length, expected) in rows {
        assert_eq!(
            extract_markdown_todos(text, max, max_length),
            expected,
            "{text:?} {max} {max_length}"
        );
    }
}

#[test]
fn extract_markdown_todos_truncates_a_long_item() {
    let todos = extract_markdown_todos(&format!("- [ ] {}", "x".repeat(500)), 20, 20);
    let expected = format!("{}…", "x".repeat(19));
    assert_eq!(todos, vec![todo(&expected, false)]);
}

// digest.ts: buildWorkDigest

fn base() -> DigestInput {
    DigestInput {
        cwd: "/work/pi-bot-connect".to_string(),
        ..DigestInput::default()
    }
}

#[test]
fn digest_header_forms() {
    let rows = [
        (base(), "### pi session — idle\n`/work/pi-bot-connect`"),
        (
            DigestInput {
                session_name: some("refactor-bridge"),
                branch: some("feat/core"),
                ..base()
            },
            "### refactor-bridge — idle\n`/work/pi-bot-connect` · branch `feat/core`",
        ),
        (
            DigestInput {
                busy: true,
                ..base()
            },
            "### pi session — busy\n`/work/pi-bot-connect`",
        ),
        (
            DigestInput {
                session_name: some("  \n"),
                branch: some(""),
                ..base()
            },
            "### pi session — idle\n`/work/pi-bot-connect`",
        ),
        // The header stays two lines whatever the host reports.
        (
            DigestInput {
                session_name: some("two\nlines"),
                branch: some(" main\n"),
                ..base()
            },
            "### two lines — idle\n`/work/pi-bot-connect` · branch `main`",
        ),
    ];
    for (input, expected) in rows {
        assert_eq!(
            build_work_digest(&input, &DigestOptions::default()),
            expected
        );
    }
}

#[test]
fn digest_options_default_to_the_original() {
    assert_eq!(
        DigestOptions::default(),
        DigestOptions {
            max_length: 1500,
            max_files: 6,
            redact: true
        }
    );
}

fn full() -> DigestInput {
    DigestInput {
        cwd: "/work/pi-bot-connect".to_string(),
        busy: true,
        session_name: some("refactor-bridge"),
        branch: some("feat/core"),
        running_tool: some("bash:   npm\ntest"),
        changes: vec![change("src/a.ts", 12, 3), change("src/b.ts", 0, 5)],
        todos: vec![
            todo("write router tests", true),
            todo("wire telegram transport", false),
            todo("write AGENTS.md", false),
        ],
        scope_verdicts: vec![
            "refused `write` README.md".to_string(),
            "approved `bash` by telegram:42 from the chat".to_string(),
        ],
        test_summary: some("npm test — 312 passed"),
        last_user_prompt: some("fix the\n\nflaky test"),
        last_assistant_summary: some("Fixed it."),
    }
}

#[test]
fn digest_sections_in_priority_order_with_exact_texts() {
    let expected = "### refactor-bridge — busy\n\
        `/work/pi-bot-connect` · branch `feat/core`\n\
        \n\
        **Now:** bash: npm test\n\
        \n\
        **Scope this turn**\n\
        - refused `write` README.md\n\
        - approved `bash` by telegram:42 from the chat\n\
        \n\
        **Changes (2 files, +12/-8)**\n\
        - `src/a.ts` +12/-3\n\
        - `src/b.ts` +0/-5\n\
        \n\
        **Tests:** npm test — 312 passed\n\
        \n\
        **Pending (2/3)**\n\
        - [x] write router tests\n\
        - [ ] wire telegram transport\n\
        - [ ] write AGENTS.md\n\
        \n\
        **Last request**\n\
        > fix the flaky test\n\
        \n\
        **Summary**\n\
        Fixed it.";
    assert_eq!(
        build_work_digest(&full(), &DigestOptions::default()),
        expected
    );
}

#[test]
fn digest_caps_the_file_list() {
    let changes = (0..9)
        .map(|i| change(&format!("src/file-{i}.ts"), 10, i))
        .collect();
    let input = DigestInput { changes, ..base() };
    let options = DigestOptions {
        max_files: 3,
        ..DigestOptions::default()
    };
    let expected = "### pi session — idle\n`/work/pi-bot-connect`\n\n\
        **Changes (9 files, +90/-36)**\n\
        - `src/file-0.ts` +10/-0\n\
        - `src/file-1.ts` +10/-1\n\
        - `src/file-2.ts` +10/-2\n\
        - …and 6 more";
    assert_eq!(build_work_digest(&input, &options), expected);

    let none_listed = DigestOptions {
        max_files: 0,
        ..DigestOptions::default()
    };
    let input = DigestInput {
        changes: vec![change("a", 1, 0)],
        ..base()
    };
    assert!(
        build_work_digest(&input, &none_listed)
            .ends_with("**Changes (1 files, +1/-0)**\n- …and 1 more")
    );
}

#[test]
fn digest_values_are_cut_to_their_limits() {
    let input = DigestInput {
        running_tool: Some("t".repeat(81)),
        test_summary: Some("s".repeat(121)),
        todos: vec![todo(&"d".repeat(101), false)],
        last_user_prompt: Some("p".repeat(201)),
        last_assistant_summary: Some("a".repeat(301)),
        ..base()
    };
    let options = DigestOptions {
        max_length: 10_000,
        ..DigestOptions::default()
    };
    let digest = build_work_digest(&input, &options);
    let expected_lines = [
        format!("**Now:** {}…", "t".repeat(79)),
        format!("**Tests:** {}…", "s".repeat(119)),
        format!("- [ ] {}…", "d".repeat(99)),
        format!("> {}…", "p".repeat(199)),
        format!("{}…", "a".repeat(299)),
    ];
    for line in expected_lines {
        assert!(
            digest.lines().any(|l| l == line),
            "missing {line:?} in {digest}"
        );
    }
}

#[test]
fn digest_omits_blank_sections() {
    let input = DigestInput {
        running_tool: some(" "),
        test_summary: some("\n"),
        todos: vec![todo("  ", false)],
        last_user_prompt: some("\t"),
        last_assistant_summary: some(""),
        ..base()
    };
    assert_eq!(
        build_work_digest(&input, &DigestOptions::default()),
        "### pi session — idle\n`/work/pi-bot-connect`"
    );
    // A blank item is not counted either.
    let input = DigestInput {
        todos: vec![todo("real", false), todo(" ", false)],
        ..base()
    };
    assert!(
        build_work_digest(&input, &DigestOptions::default())
            .ends_with("**Pending (1/1)**\n- [ ] real")
    );
}

#[test]
fn digest_drops_sections_over_budget_and_names_them() {
    // Header 38 characters; each kept section adds 2 + its length: Now 25 (63), Changes 49
    // (112), Tests 28 (140); Pending 33 would reach 173 and the request 221 more, both over
    // 160; Summary 20 lands exactly on 160, which still fits.
    let input = DigestInput {
        cwd: "/w".to_string(),
        session_name: some("s"),
        branch: some("feat/core"),
        running_tool: some("bash: npm test"),
        changes: vec![change("src/a.ts", 1, 1)],
        todos: vec![todo("ship it", false)],
        test_summary: some("cargo test — ok"),
        last_user_prompt: Some("x".repeat(400)),
        last_assistant_summary: some("Fixed."),
        ..DigestInput::default()
    };
    let options = DigestOptions {
        max_length: 160,
        ..DigestOptions::default()
    };
    let expected = "### s — idle\n`/w` · branch `feat/core`\n\n\
        **Now:** bash: npm test\n\n\
        **Changes (1 files, +1/-1)**\n- `src/a.ts` +1/-1\n\n\
        **Tests:** cargo test — ok\n\n\
        **Summary**\nFixed.\n\n\
        _digest truncated (todos, request)_";
    assert_eq!(build_work_digest(&input, &options), expected);
}

#[test]
fn digest_always_keeps_the_first_section() {
    let input = DigestInput {
        changes: vec![change("src/a.ts", 1, 1)],
        test_summary: some("ok"),
        last_assistant_summary: some("done"),
        ..base()
    };
    let options = DigestOptions {
        max_length: 10,
        ..DigestOptions::default()
    };
    let expected = "### pi session — idle\n`/work/pi-bot-connect`\n\n\
        **Changes (1 files, +1/-1)**\n- `src/a.ts` +1/-1\n\n\
        _digest truncated (tests, summary)_";
    assert_eq!(build_work_digest(&input, &options), expected);
}

#[test]
fn digest_redacts_the_request_and_summary_only() {
    let token = format!("ghp_{}", "A1b2C3d4E5".repeat(3) + "f6G7h8");
    assert_eq!(token.len(), 40);
    let path = format!("config/{token}.json");
    let input = DigestInput {
        running_tool: some("bash"),
        changes: vec![change(&path, 1, 0)],
        last_user_prompt: Some(format!("deploy with token {token}")),
        last_assistant_summary: Some(format!("used {token}")),
        ..base()
    };
    let digest = build_work_digest(&input, &DigestOptions::default());
    assert!(digest.contains(&format!("- `{path}` +1/-0")), "{digest}");
    assert!(
        digest.contains("> deploy with token [redacted:github-token]"),
        "{digest}"
    );
    assert!(
        digest.contains("**Summary**\nused [redacted:github-token]"),
        "{digest}"
    );
    assert_eq!(digest.matches(token.as_str()).count(), 1, "{digest}");

    let plain = DigestOptions {
        redact: false,
        ..DigestOptions::default()
    };
    let digest = build_work_digest(&input, &plain);
    assert!(
        digest.contains(&format!("> deploy with token {token}")),
        "{digest}"
    );
}

#[test]
fn digest_redacts_before_collapsing_line_breaks() {
    // A PEM block and an `Authorization:` header are recognised by their line breaks.
    let summary = "here:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nAuthorization: Basic dXNlcjpwYXNz\nbye";
    let input = DigestInput {
        last_assistant_summary: some(summary),
        ..base()
    };
    let digest = build_work_digest(&input, &DigestOptions::default());
    assert!(
        digest.ends_with("**Summary**\nhere: [redacted:private-key] Authorization: [redacted] bye"),
        "{digest}"
    );
}

// Properties

/// Any text at all, or text shaped like numstat output (with CRLF sometimes).
fn numstat_text() -> impl Strategy<Value = String> {
    let line = "[0-9-]{0,3}\t[0-9-]{0,3}\t[a-z/{} =>\"\\\\0-7]{0,16}";
    prop_oneof![
        any::<String>(),
        (prop::collection::vec(line, 0..12), any::<bool>())
            .prop_map(|(lines, crlf)| { lines.join(if crlf { "\r\n" } else { "\n" }) }),
    ]
}

fn optional_text() -> impl Strategy<Value = Option<String>> {
    prop::option::of(prop_oneof![any::<String>(), "[a-z \n]{0,40}"])
}

fn any_input() -> impl Strategy<Value = DigestInput> {
    let changes = prop::collection::vec(
        (any::<String>(), any::<u64>(), any::<u64>()).prop_map(|(path, added, removed)| {
            FileChange {
                path,
                added,
                removed,
            }
        }),
        0..10,
    );
    let todos = prop::collection::vec(
        (any::<String>(), any::<bool>()).prop_map(|(text, done)| Todo { text, done }),
        0..8,
    );
    (
        (
            any::<String>(),
            any::<bool>(),
            optional_text(),
            optional_text(),
            optional_text(),
        ),
        (changes, todos),
        (optional_text(), optional_text(), optional_text()),
    )
        .prop_map(
            |(
                (cwd, busy, session_name, branch, running_tool),
                (changes, todos),
                (test_summary, last_user_prompt, last_assistant_summary),
            )| DigestInput {
                cwd,
                busy,
                session_name,
                branch,
                running_tool,
                changes,
                todos,
                scope_verdicts: Vec::new(),
                test_summary,
                last_user_prompt,
                last_assistant_summary,
            },
        )
}

/// Small inputs whose present texts are never blank, so every present section must show.
fn small_input() -> impl Strategy<Value = DigestInput> {
    let word = "[a-z][a-z ]{0,19}";
    let changes = prop::collection::vec(
        ("[a-z/]{1,20}", 0u64..1000, 0u64..1000).prop_map(|(path, added, removed)| FileChange {
            path,
            added,
            removed,
        }),
        0..10,
    );
    let todos = prop::collection::vec(
        (word, any::<bool>()).prop_map(|(text, done)| Todo { text, done }),
        0..6,
    );
    (
        (prop::option::of(word), prop::option::of(word)),
        (changes, todos),
        (
            prop::option::of(word),
            prop::option::of(word),
            prop::option::of(word),
        ),
    )
        .prop_map(
            |(
                (running_tool, test_summary),
                (changes, todos),
                (session_name, last_user_prompt, last_assistant_summary),
            )| DigestInput {
                cwd: "/work/x".to_string(),
                busy: false,
                session_name,
                branch: None,
                running_tool,
                changes,
                todos,
                scope_verdicts: Vec::new(),
                test_summary,
                last_user_prompt,
                last_assistant_summary,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn numstat_never_panics_and_is_sorted_and_capped(
        output in numstat_text(),
        max in prop::option::of(0usize..8),
    ) {
        let changes = parse_git_numstat(&output, max);
        if let Some(max) = max {
            prop_assert!(changes.len() <= max);
        }
        for pair in changes.windows(2) {
            if let [a, b] = pair {
                prop_assert!(a.added.saturating_add(a.removed) >= b.added.saturating_add(b.removed));
            }
        }
        for change in &changes {
            prop_assert!(!change.path.is_empty());
            prop_assert!(change.path.chars().count() <= 200);
        }
    }

    /// Never panics; the kept sections stay within `max_length` unless only the first one is
    /// kept; the truncation line, when present, is last.
    #[test]
    fn digest_never_panics_and_keeps_its_budget(
        input in any_input(),
        max_length in 0usize..2000,
        max_files in 0usize..8,
        redact in any::<bool>(),
    ) {
        let options = DigestOptions { max_length, max_files, redact };
        let digest = build_work_digest(&input, &options);
        prop_assert!(digest.starts_with("### "));
        let body = match digest.rfind("\n\n_digest truncated (") {
            Some(at) => {
                prop_assert!(digest.ends_with(")_"));
                digest.get(..at).unwrap_or_default()
            }
            None => digest.as_str(),
        };
        if body.chars().count() > max_length {
            prop_assert!(body.matches("\n\n").count() <= 1, "{}", digest);
        }
    }

    #[test]
    fn digest_shows_every_present_section_when_all_fit(input in small_input()) {
        let options = DigestOptions { max_length: 10_000, ..DigestOptions::default() };
        let digest = build_work_digest(&input, &options);
        prop_assert!(!digest.contains("_digest truncated"));
        let expected = [
            ("**Now:** ", input.running_tool.is_some()),
            ("**Changes (", !input.changes.is_empty()),
            ("**Tests:** ", input.test_summary.is_some()),
            ("**Pending (", !input.todos.is_empty()),
            ("**Last request**\n> ", input.last_user_prompt.is_some()),
            ("**Summary**\n", input.last_assistant_summary.is_some()),
        ];
        let mut last = 0;
        for (heading, present) in expected {
            match digest.find(heading) {
                Some(at) => {
                    prop_assert!(present, "{heading} shown without a value");
                    prop_assert!(at >= last, "{heading} out of order");
                    last = at;
                }
                None => prop_assert!(!present, "{heading} missing"),
            }
        }
    }
}

#[test]
fn strip_markdown_todos_table() {
    let rows = [
        ("## Done.\n\n- [x] read it\n- [ ] ship it", "## Done.\n"),
        ("a\n* [X] b\n  + [ ] c\nd", "a\nd"),
        // A checklist in a code sample is not the plan: kept, as extraction skips it.
        (
            "```\n- [ ] in code\n```\n- [ ] out",
            "```\n- [ ] in code\n```",
        ),
        // Plain bullets and prose stay.
        (
            "- plain\n-[ ] not a task\n- [ ]   ",
            "- plain\n-[ ] not a task\n- [ ]   ",
        ),
        ("", ""),
    ];
    for (text, expected) in rows {
        assert_eq!(strip_markdown_todos(text), expected, "{text:?}");
        // What is stripped is exactly what extraction reads.
        assert!(extract_markdown_todos(&strip_markdown_todos(text), 100, 100).is_empty());
    }
}

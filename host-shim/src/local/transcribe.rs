//! Speech to text (`speech.transcribe`, docs/media.md#voice): an OpenAI-compatible
//! `/audio/transcriptions` endpoint or a local command, run for the bridge, which chose the
//! engine and the caps.
//!
//! Every failure is a sentence for the person who sent the voice note (the bridge puts it
//! in the chat): which engine, what went wrong, what to do. None names the key, and none
//! holds the endpoint's URL (a key can sit in one).

use std::time::Duration;

use crate::wit::speech::{Audio, CommandEngine, Engine, HttpEngine};

/// Most of a transcript kept: a voice note of the longest allowed length is a few KiB of
/// text; an engine that prints megabytes is not giving a transcript.
const MAX_TRANSCRIPT_BYTES: usize = 256 * 1024;

/// Where the key's variable is read; the live host passes the process environment.
pub type Env<'a> = &'a (dyn Fn(&str) -> Option<String> + Send + Sync);

/// Transcribes `audio` with `engine` within `timeout`.
pub async fn transcribe(
    engine: Engine,
    audio: Audio,
    timeout: Duration,
    env: Env<'_>,
) -> Result<String, String> {
    match engine {
        Engine::Http(http) => over_http(http, audio, timeout, env).await,
        Engine::Command(command) => by_command(command, audio, timeout).await,
    }
}

async fn over_http(
    engine: HttpEngine,
    audio: Audio,
    timeout: Duration,
    env: Env<'_>,
) -> Result<String, String> {
    let key = match &engine.api_key_env {
        Some(name) => Some(env(name).filter(|v| !v.trim().is_empty()).ok_or_else(|| {
            format!(
                "the transcription key's variable {name} is not set where host-shim runs; \
                 export it there (bridge.voice.apiKeyEnv names it)"
            )
        })?),
        None => None,
    };
    let base = reqwest::Url::parse(engine.base_url.trim_end_matches('/'))
        .ok()
        .filter(|url| matches!(url.scheme(), "http" | "https"))
        .ok_or("bridge.voice.baseUrl is not an http(s) URL")?;
    let endpoint = reqwest::Url::parse(&format!("{base}/audio/transcriptions"))
        .map_err(|_| "bridge.voice.baseUrl does not make a URL with /audio/transcriptions")?;
    let client = transport_core::http_client::http_client(
        "transcription",
        &base,
        transport_core::http_client::USER_AGENT,
    )
    .map_err(|error| error.to_string())?;
    let mut fields = vec![
        ("model", engine.model.clone()),
        ("response_format", "json".to_owned()),
    ];
    if let Some(language) = engine.language {
        fields.push(("language", language));
    }
    let mut request = client.post(endpoint).multipart(form(fields, audio)?);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let seconds = timeout.as_secs_f64();
    let exchange = async {
        let response = request.send().await.map_err(|error| {
            format!(
                "could not reach the transcription server ({})",
                transport_core::http_client::describe(error)
            )
        })?;
        let status = response.status();
        let body = transport_core::download::read_capped(response, MAX_TRANSCRIPT_BYTES as u64)
            .await
            .map_err(|error| match error {
                transport_core::download::DownloadFailure::Status(code) => {
                    format!("the transcription server answered HTTP {code}")
                }
                other => format!("the transcription server's answer could not be read ({other})"),
            })?;
        if !status.is_success() {
            return Err(format!("the transcription server answered HTTP {status}"));
        }
        Ok(body.data)
    };
    let data = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| format!("the transcription server did not answer within {seconds:.0} s"))??;
    let text = serde_json::from_slice::<serde_json::Value>(&data)
        .ok()
        .and_then(|value| value.get("text")?.as_str().map(str::to_owned))
        .ok_or(
            "the transcription server answered something that is not a transcript (expected \
             JSON with a \"text\" field: is bridge.voice.baseUrl an OpenAI-compatible /v1?)",
        )?;
    Ok(text)
}

/// The upload's form: the text `fields`, then the audio as `file` with its name and media
/// type; a media type reqwest cannot read goes as `application/octet-stream` (the server
/// reads the audio's own header anyway).
fn form(
    fields: Vec<(&'static str, String)>,
    audio: Audio,
) -> Result<reqwest::multipart::Form, String> {
    let mut form = reqwest::multipart::Form::new();
    for (name, value) in fields {
        form = form.text(name, value);
    }
    // Tried on an empty part first: a refused media type would take the audio with it.
    let media_type = match reqwest::multipart::Part::text("").mime_str(&audio.media_type) {
        Ok(_) => audio.media_type.as_str(),
        Err(_) => "application/octet-stream",
    };
    let part = reqwest::multipart::Part::bytes(audio.data)
        .file_name(audio.name.clone())
        .mime_str(media_type)
        .map_err(|_| format!("the audio's media type {media_type} could not be sent"))?;
    Ok(form.part("file", part))
}

async fn by_command(
    engine: CommandEngine,
    audio: Audio,
    timeout: Duration,
) -> Result<String, String> {
    let Some(program) = engine.argv.first().cloned() else {
        return Err("bridge.voice.command is empty; name the program and its arguments".into());
    };
    let extension = audio
        .name
        .rsplit_once('.')
        .map(|(_, ext)| ext)
        .filter(|ext| ext.chars().all(|c| c.is_ascii_alphanumeric()) && ext.len() <= 8)
        .unwrap_or("bin");
    // A private file (0600, in the system's temporary directory), removed when dropped,
    // whatever happens to the command.
    let file = tempfile::Builder::new()
        .prefix("bot-connect-voice-")
        .suffix(&format!(".{extension}"))
        .tempfile()
        .map_err(|error| format!("could not write the audio for {program}: {error}"))?;
    std::fs::write(file.path(), &audio.data)
        .map_err(|error| format!("could not write the audio for {program}: {error}"))?;
    let path = file.path().to_string_lossy().into_owned();
    let args: Vec<String> = engine.argv[1..]
        .iter()
        .map(|arg| arg.replace("{file}", &path))
        .collect();
    let child = tokio::process::Command::new(&program)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        // A command that outlives its timeout is killed, not left running.
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| {
            format!(
                "could not run {program} ({error}); is it installed and on the PATH of host-shim?"
            )
        })?;
    let seconds = timeout.as_secs_f64();
    let output = tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .map_err(|_| format!("{program} did not finish within {seconds:.0} s, so it was stopped"))?
        .map_err(|error| format!("{program} could not be waited for ({error})"))?;
    drop(file);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String = stderr
            .trim()
            .chars()
            .rev()
            .take(300)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return Err(format!("{program} failed ({}): {tail}", output.status));
    }
    let mut stdout = output.stdout;
    stdout.truncate(MAX_TRANSCRIPT_BYTES);
    Ok(String::from_utf8_lossy(&stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    fn audio() -> Audio {
        Audio {
            media_type: "audio/ogg".into(),
            name: "voice.ogg".into(),
            data: b"OggS\x00fake opus".to_vec(),
        }
    }

    fn http(base: &str, key_env: Option<&str>) -> Engine {
        Engine::Http(HttpEngine {
            base_url: base.into(),
            api_key_env: key_env.map(String::from),
            model: "whisper-1".into(),
            language: Some("en".into()),
        })
    }

    /// A one-connection-at-a-time HTTP server on 127.0.0.1 that records each request and
    /// answers with `reply` (status line and body), or never answers when `reply` is None.
    async fn server(
        reply: Option<(&'static str, &'static str)>,
    ) -> (String, Arc<Mutex<Vec<Vec<u8>>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}/v1", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut request = Vec::new();
                let mut buf = [0u8; 8192];
                // Reads headers, then the body by Content-Length; bounded by the test's
                // own timeout.
                loop {
                    let n = socket.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    request.extend_from_slice(&buf[..n]);
                    if let Some(end) = find(&request, b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&request[..end]).to_lowercase();
                        let length = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                record.lock().unwrap().push(request);
                match reply {
                    Some((status, body)) => {
                        let answer = format!(
                            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = socket.write_all(answer.as_bytes()).await;
                    }
                    None => {
                        // Hold the connection open without answering.
                        tokio::time::sleep(Duration::from_secs(30)).await;
                    }
                }
            }
        });
        (base, seen)
    }

    fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
        haystack.windows(needle.len()).position(|w| w == needle)
    }

    fn env(name: &str) -> Option<String> {
        (name == "TEST_WHISPER_KEY").then(|| "sk-test-123".to_owned())
    }

    #[tokio::test]
    async fn an_openai_compatible_server_gets_a_multipart_upload_with_the_key_and_its_text_comes_back()
     {
        let (base, seen) = server(Some(("200 OK", r#"{"text":"run the tests please"}"#))).await;
        let text = transcribe(
            http(&base, Some("TEST_WHISPER_KEY")),
            audio(),
            Duration::from_secs(5),
            &env,
        )
        .await;
        assert_eq!(text.as_deref(), Ok("run the tests please"));
        let request = seen.lock().unwrap()[0].clone();
        let text = String::from_utf8_lossy(&request);
        assert!(
            text.starts_with("POST /v1/audio/transcriptions HTTP/1.1"),
            "{text}"
        );
        assert!(
            text.to_lowercase()
                .contains("authorization: bearer sk-test-123")
        );
        assert!(text.contains("multipart/form-data; boundary="), "{text}");
        assert!(text.contains("name=\"model\"\r\n\r\nwhisper-1\r\n"));
        assert!(text.contains("name=\"language\"\r\n\r\nen\r\n"));
        assert!(text.contains(
            "name=\"file\"; filename=\"voice.ogg\"\r\nContent-Type: audio/ogg\r\n\r\nOggS\u{0}fake opus\r\n"
        ));
    }

    #[tokio::test]
    async fn a_missing_key_a_refusal_garbage_and_silence_each_get_a_sentence_without_the_key() {
        let (base, seen) = server(Some(("200 OK", "{}"))).await;
        let unset = transcribe(
            http(&base, Some("UNSET_VAR")),
            audio(),
            Duration::from_secs(5),
            &env,
        )
        .await
        .unwrap_err();
        assert!(unset.contains("UNSET_VAR is not set"), "{unset}");
        assert!(
            seen.lock().unwrap().is_empty(),
            "nothing sent without the key"
        );

        let garbage = transcribe(http(&base, None), audio(), Duration::from_secs(5), &env)
            .await
            .unwrap_err();
        assert!(garbage.contains("not a transcript"), "{garbage}");

        let (refusing, _) = server(Some((
            "401 Unauthorized",
            r#"{"error":"bad key sk-test-123"}"#,
        )))
        .await;
        let refused = transcribe(
            http(&refusing, Some("TEST_WHISPER_KEY")),
            audio(),
            Duration::from_secs(5),
            &env,
        )
        .await
        .unwrap_err();
        assert_eq!(refused, "the transcription server answered HTTP 401");

        let (silent, _) = server(None).await;
        let started = std::time::Instant::now();
        let timed_out = transcribe(
            http(&silent, None),
            audio(),
            Duration::from_millis(300),
            &env,
        )
        .await
        .unwrap_err();
        assert!(timed_out.contains("did not answer within"), "{timed_out}");
        assert!(started.elapsed() < Duration::from_secs(5));

        for error in [&unset, &garbage, &refused, &timed_out] {
            assert!(
                !error.contains("sk-test-123") && !error.contains("127.0.0.1"),
                "{error}"
            );
        }
    }

    #[tokio::test]
    async fn a_command_gets_the_audio_as_a_file_and_its_stdout_is_the_transcript() {
        // `sh -c` only as the test's stand-in for whisper-cli: the engine itself runs no shell.
        let engine = Engine::Command(CommandEngine {
            argv: vec![
                "sh".into(),
                "-c".into(),
                "head -c 4 \"$0\"; echo ' heard'".into(),
                "{file}".into(),
            ],
        });
        let text = transcribe(engine, audio(), Duration::from_secs(10), &env).await;
        assert_eq!(text.as_deref(), Ok("OggS heard\n"));

        let failing = Engine::Command(CommandEngine {
            argv: vec![
                "sh".into(),
                "-c".into(),
                "echo 'model not found' >&2; exit 3".into(),
            ],
        });
        let error = transcribe(failing, audio(), Duration::from_secs(10), &env)
            .await
            .unwrap_err();
        assert!(
            error.starts_with("sh failed (exit status: 3): model not found"),
            "{error}"
        );

        let missing = Engine::Command(CommandEngine {
            argv: vec!["no-such-whisper-cli-here".into(), "{file}".into()],
        });
        let error = transcribe(missing, audio(), Duration::from_secs(10), &env)
            .await
            .unwrap_err();
        assert!(error.contains("is it installed"), "{error}");

        let slow = Engine::Command(CommandEngine {
            argv: vec!["sleep".into(), "30".into()],
        });
        let started = std::time::Instant::now();
        let error = transcribe(slow, audio(), Duration::from_millis(300), &env)
            .await
            .unwrap_err();
        assert!(error.contains("did not finish within"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}

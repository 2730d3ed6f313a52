#!/usr/bin/env python3
"""Writes the committed seed corpora (fuzz/corpus/<target>/) from the payload shapes the
crates' own tests use: Discord's recorded payloads are copied, the others are the shapes
the normalize, config, state, pipeline and RPC tests build. Run from anywhere; it rewrites
only the files it names."""
import json, os, pathlib, shutil, struct

ROOT = pathlib.Path(__file__).resolve().parent
REPO = ROOT.parent
CORPUS = ROOT / "corpus"

def put(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(data, (dict, list)):
        data = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    if isinstance(data, str):
        data = data.encode()
    (d / name).write_bytes(data)

# --- telegram (bot id 999, @piBot, as transports/telegram/tests/telegram/normalize.rs) ---
BOT = 999
GROUP = -1001160242915
person = {"id": 5000000001, "is_bot": False, "first_name": "Ada", "username": "ada", "language_code": "en"}
bot_user = {"id": BOT, "is_bot": True, "first_name": "Pi", "username": "piBot"}
private = {"id": 5000000001, "first_name": "Ada", "username": "ada", "type": "private"}
group = {"id": GROUP, "title": "Team", "type": "supergroup"}
forum = dict(group, is_forum=True)
def text_in(chat, text, entities=(), **extra):
    m = {"message_id": 10, "from": person, "chat": chat, "date": 1700000000, "text": text, "entities": list(entities)}
    m.update(extra)
    return m
def ent(text, needle, kind, **extra):
    at = text.index(needle)
    e = {"type": kind, "offset": len(text[:at].encode("utf-16-le")) // 2, "length": len(needle.encode("utf-16-le")) // 2}
    e.update(extra)
    return e
upd = lambda m, i=100: {"update_id": i, "message": m}
t = "telegram"
put("normalize_" + t, "private", upd(text_in(private, "status")))
s = "@piBot, status please"
put("normalize_" + t, "mention", upd(text_in(group, s, [ent(s, "@piBot", "mention")])))
s = "/status@piBot"
put("normalize_" + t, "command_for_us", upd(text_in(group, s, [ent(s, s, "bot_command")])))
s = "/status@OtherBot"
put("normalize_" + t, "command_for_other", upd(text_in(group, s, [ent(s, s, "bot_command")])))
s = "hi 👋 Pi look"
put("normalize_" + t, "text_mention_utf16", upd(text_in(group, s, [ent(s, "Pi", "text_mention", user=bot_user)])))
own = text_in(group, "Done.", from_=None)
own.pop("from_"); own["from"] = bot_user
put("normalize_" + t, "own_message", upd(own))
own_bare = dict(own); put("normalize_" + t, "own_bare_message", own_bare)
reply = text_in(group, "and now?", reply_to_message={"message_id": 9, "from": bot_user, "chat": group, "date": 1699999999, "text": "hi"})
put("normalize_" + t, "reply_to_bot", upd(reply))
topic = text_in(forum, "in topic", is_topic_message=True, message_thread_id=7,
                reply_to_message={"message_id": 7, "from": bot_user, "chat": forum, "date": 1, "forum_topic_created": {"name": "t", "icon_color": 1}})
put("normalize_" + t, "topic", upd(topic))
anon = text_in(group, "hi", sender_chat={"id": GROUP, "title": "Team", "type": "supergroup"})
anon["from"] = {"id": 1087968824, "is_bot": True, "first_name": "Group", "username": "GroupAnonymousBot"}
put("normalize_" + t, "anonymous_admin", upd(anon))
photo = {"message_id": 12, "from": person, "chat": private, "date": 1700000000, "caption": "look @piBot",
         "caption_entities": [{"type": "mention", "offset": 5, "length": 6}],
         "photo": [{"file_id": "small", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 1000},
                   {"file_id": "big", "file_unique_id": "b", "width": 1280, "height": 960, "file_size": 90000}]}
put("normalize_" + t, "photo_caption", upd(photo))
doc = {"message_id": 13, "from": person, "chat": private, "date": 1700000000,
       "document": {"file_id": "d1", "file_unique_id": "u", "file_name": "notes.pdf", "mime_type": "application/pdf", "file_size": 1234}}
put("normalize_" + t, "document", upd(doc))
put("normalize_" + t, "edited", {"update_id": 101, "edited_message": text_in(private, "fixed typo")})
put("normalize_" + t, "channel_post", {"update_id": 102, "channel_post": {"message_id": 1, "chat": {"id": -1009999, "type": "channel"}, "date": 1, "text": "x"}})
put("normalize_" + t, "callback_query", {"update_id": 103, "callback_query": {"id": "1", "from": person, "chat_instance": "x", "data": "y"}})
auto = text_in(group, "new post", is_automatic_forward=True, sender_chat={"id": -1009999, "title": "News", "type": "channel"})
auto["from"] = {"id": 777000, "is_bot": False, "first_name": "Telegram"}
put("normalize_" + t, "auto_forward", upd(auto))
put("normalize_" + t, "service", upd({"message_id": 11, "from": person, "chat": group, "date": 1700000000, "new_chat_members": [person]}))

# --- discord: the recorded payloads ---
for p in sorted((REPO / "transports/discord/tests/payloads").glob("*.json")):
    put("normalize_discord", p.stem, json.loads(p.read_text()))
put("normalize_discord", "own_message", {"t": "MESSAGE_CREATE", "op": 0, "d": {"type": 0, "id": "1235132960000000009", "channel_id": "1100000000000000100", "content": "Done.", "author": {"id": "987654321098765432", "username": "pi-bot", "bot": True}, "mentions": [], "attachments": []}})
put("normalize_discord", "hello_frame", {"op": 10, "d": {"heartbeat_interval": 41250}})

# --- slack (bot U0BOT1234) ---
SB = "U0BOT1234"
def callback(event):
    return {"token": "verification", "team_id": "T111", "api_app_id": "A111", "event": event, "type": "event_callback", "event_id": "Ev111", "event_time": 1599616881}
def socket(payload):
    return {"envelope_id": "57d6a792-4d35-4d0b-b6aa-3361493e1caf", "payload": payload, "type": "events_api", "accepts_response_payload": False, "retry_attempt": 0, "retry_reason": ""}
dm = {"client_msg_id": "a8744611", "type": "message", "text": "Hello hello can you hear me?", "user": "W222", "ts": "1610261659.001400", "team": "T111", "channel": "D111", "event_ts": "1610261659.001400", "channel_type": "im"}
put("normalize_slack", "socket_dm", socket(callback(dm)))
put("normalize_slack", "app_mention", callback({"type": "app_mention", "text": f"<@{SB}> /status", "user": "W222", "ts": "1595926230.009600", "channel": "C111", "event_ts": "1595926230.009600"}))
put("normalize_slack", "mention_with_label", {"type": "app_mention", "text": f"<@{SB}|pi>, status", "user": "U9", "ts": "1.000001", "channel": "C111"})
put("normalize_slack", "channel_mixed", {"type": "message", "channel": "C111", "channel_type": "channel", "user": "U222", "text": f"ask <@U999|ada> and <@{SB}> &amp; <https://x.example|x> <!here>", "ts": "1700000000.000100"})
put("normalize_slack", "thread_reply", {"type": "message", "text": "and the tests?", "user": "W222", "ts": "1610261700.002000", "thread_ts": "1610261659.001400", "parent_user_id": "W222", "channel": "C111", "channel_type": "channel"})
put("normalize_slack", "own_message", callback({"type": "message", "text": "Done.", "user": SB, "ts": "1700000001.000100", "channel": "D111", "channel_type": "im"}))
put("normalize_slack", "bot_message", {"type": "message", "subtype": "bot_message", "bot_id": "B111", "text": "beep", "ts": "1.000003", "channel": "C111"})
put("normalize_slack", "file_share", {"type": "message", "subtype": "file_share", "user": "W222", "text": "", "ts": "1.000004", "channel": "D111", "channel_type": "im", "files": [{"id": "F1", "name": "a.png", "mimetype": "image/png", "size": 10, "url_private_download": "https://files.slack.com/a.png"}]})
put("normalize_slack", "changed", {"type": "message", "subtype": "message_changed", "channel": "C111", "ts": "1.000005", "message": {"type": "message", "user": "W222", "text": "x", "ts": "1.000001"}})
put("normalize_slack", "hello_envelope", {"type": "hello", "envelope_id": "e", "num_connections": 1})

# --- robo_claw (proto3 JSON; a leading `c` selects self id "claw-bot") ---
put("normalize_robo_claw", "from_person", {"senderId": "bob", "content": "hi", "timestamp": "17", "metadata": {"room_id": "r"}})
put("normalize_robo_claw", "snake_case", {"sender_id": "ann", "content": "yo"})
put("normalize_robo_claw", "own_default", {"sender_id": "robot", "content": "echo"})
put("normalize_robo_claw", "own_padded", {"sender_id": " robot\t", "content": "echo"})
put("normalize_robo_claw", "own_custom", b"c" + json.dumps({"sender_id": "claw-bot", "content": "echo"}).encode())
put("normalize_robo_claw", "file", {"sender_id": "ann", "content": "", "timestamp": 1700000000000, "metadata": {"file_id": "f-1", "type": "image/PNG", "filename": "a.png", "auth_token": "secret-token-value"}})
put("normalize_robo_claw", "bad_metadata", {"content": "x", "metadata": {"a": 1}})

# --- gRPC: protobuf ChatMessage {1 sender_id, 2 content, 3 timestamp, 4 metadata map} ---
def varint(n):
    out = b""
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7f; n >>= 7
        if n: out += bytes([b | 0x80])
        else: return out + bytes([b])
def field(num, wire, payload):
    key = varint((num << 3) | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload
def chat(sender, content, ts=0, meta=()):
    b = field(1, 2, sender.encode()) + field(2, 2, content.encode())
    if ts: b += field(3, 0, varint(ts))
    for k, v in meta:
        b += field(4, 2, field(1, 2, k.encode()) + field(2, 2, v.encode()))
    return b
put("grpc_chat_message", "person", chat("bob", "hi", 1700000000000, [("room_id", "r")]))
put("grpc_chat_message", "own", chat("robot", "echo", 1700000000000))
put("grpc_chat_message", "own_padded", chat("  robot ", "echo"))
put("grpc_chat_message", "file", chat("ann", "", 5, [("file_id", "f-1"), ("type", "image/png"), ("filename", "a.png")]))
put("grpc_chat_message", "negative_time", chat("ann", "status", -1))
put("grpc_chat_message", "long_room", chat("ann", "x", 1, [("room_id", "r" * 300)]))

# --- config ---
put("config", "example", (REPO / "examples/bot-connect.json").read_text())
put("config", "strict", (REPO / "examples/strict.json").read_text())
put("config", "transports", {"transports": {"telegram": {"enabled": True, "tokenEnv": "PI_TELEGRAM_TOKEN", "baseUrl": "http://127.0.0.1:8081", "lockStaleMs": 60000},
    "discord": {"tokenEnv": "PI_DISCORD_TOKEN", "gatewayUrl": "wss://gateway.discord.gg"}, "slack": {"enabled": False, "appTokenEnv": "PI_SLACK_APP_TOKEN"},
    "robo_claw": {"port": 50052, "host": "127.0.0.1", "selfSenderId": "robot"}, "terminal": {"enabled": True}}})
put("config", "secret_values", {"transports": {"telegram": {"tokenEnv": "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawx"}, "discord": {"baseUrl": "https://deploy:Sup3rS3cret@discord.example.com"},
    "slack": {"tokenEnv": "xoxb-1234567890-abcdefghij"}}, "bridge": {"remotePrefixes": ["sk-ant-api03-Zk3vQ9xLp2mN8rT4wY6uB1"]}})
put("config", "secret_keys", {"bridge": {"ghp_Q1w2E3r4T5y6U7i8O9p0AsDfGhJkLzXcVbNm": 1}, "AKIAQWERTYUIOPASDFGH": {}, "transports": {"telegram": {"xapp-1-A05B7C9D1E3-92837465abcdef": True}}})
put("config", "misspelt_guards", {"brigde": {"remoteToolPolcy": "full"}})
put("config", "bad_types", {"bridge": {"pairingTtlMs": "soon", "pairingDigits": 99, "remoteToolPolicy": "yolo", "rateLimit": {"promptsPerMinute": -1}, "maxChunks": 0}})
put("config", "two_files", json.dumps({"bridge": {"maxChunks": 4}}) + "\0" + json.dumps({"bridge": {"remoteToolApproval": "ask"}, "transports": {"terminal": {"enabled": False}}}))
put("config", "broken", '{"bridge": {"remoteToolPolicy": "full",')

# --- state (the document under sessions.<id>) ---
put("state", "full", {"updatedAt": 1700000000000,
    "trusted": {"telegram:5000000001": 1699999000000, "discord:134127815531560960": 1699999500000},
    "pending": {"telegram:-1001160242915": {"salt": "00112233445566778899aabbccddeeff", "sha256": "a" * 64, "digits": 6, "expiresAt": 1700000300000, "attempts": 1}},
    "paused": ["slack:C111"],
    "conversations": [{"transport": "telegram", "conversationId": "-1001160242915", "threadId": "7"}, {"transport": "slack", "conversationId": "D111"}],
    "turn": {"startedAt": 1700000000000, "remote": True, "cards": [{"transport": "telegram", "conversationId": "5000000001", "editKey": "42"}]},
    "queued": [{"transport": "discord", "conversationId": "1100000000000000100"}]})
put("state", "empty", {})
put("state", "damaged", {"updatedAt": "yesterday", "trusted": {"telegram:1": "x", "bad": 1}, "pending": [], "paused": "no", "conversations": [{}], "turn": {"startedAt": 1}, "queued": [{"transport": 1}]})
put("state", "not_json", "{\"trusted\": {")

# --- outbound: markup, unit, limit (u16 BE), cap, text ---
MARKUPS = ["markdown", "html", "mrkdwn", "plain"]
UNITS = ["chars", "utf16", "bytes"]
def pipe(markup, unit, limit, cap, text):
    return bytes([MARKUPS.index(markup), UNITS.index(unit)]) + struct.pack(">H", limit) + bytes([cap]) + text.encode()
md = "# Title\n\nSome **bold** and _it_ with `x < y` and [link](https://example.com/a?b=1&c=2).\n\n- one\n- two\n  - nested\n\n> quote\n> > deeper\n\n```rust\nfn main() { let a = 1 < 2 && true; }\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
put("outbound", "telegram_md", pipe("html", "utf16", 4096, 8, md))
put("outbound", "telegram_small", pipe("html", "utf16", 40, 20, md))
put("outbound", "discord_md", pipe("markdown", "utf16", 2000, 8, md))
put("outbound", "discord_small", pipe("markdown", "utf16", 30, 50, md))
put("outbound", "slack_md", pipe("mrkdwn", "chars", 4000, 8, md + "a&b<c>\"d\" <@U1>\n"))
put("outbound", "slack_small", pipe("mrkdwn", "chars", 25, 50, md))
put("outbound", "plain_bytes", pipe("plain", "bytes", 16, 3, "日本語 👨\u200d👩\u200d👧 🇩🇪🇫🇷 é\r\n\r\nline\r\nend"))
put("outbound", "secrets", pipe("html", "utf16", 60, 30,
    "the key is sk-ant-api03-Zk3vQ9xLp2mN8rT4wY6uB1 ok\n```\nexport GITHUB_TOKEN=ghp_Q1w2E3r4T5y6U7i8O9p0AsDfGhJkLzXcVbNm\n```\n"
    "https://deploy:Sup3rS3cret@git.example.com/repo.git /bot7123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/\n"
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAw1\nq9zX0+/abc=\n-----END RSA PRIVATE KEY-----\n"
    "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4 AKIAQWERTYUIOPASDFGH xapp-1-A05B7C9D1E3-92837465abcdef\n"
    "Authorization: Bearer abcdefghijklmnop\nPASSWORD=hunter2hunter2\n"))
# Issue 32: the secret catalog's single-line positives (guest/src/core/secret_families.rs),
# planted in the places an agent prints them, under every markup and a small limit.
import re as _re
_families = (REPO / "guest/src/core/secret_families.rs").read_text()
_positives = []
for _block in _re.findall(r"positives: &\[(.*?)\],\n", _families, _re.S):
    for _lit in _re.findall(r'"((?:[^"\\]|\\.)*)"', _block):
        _text = _lit.encode().decode("unicode_escape")
        if "\n" not in _text:
            _positives.append(_text)
_places = ["the key is {}.", "`{}`", "- {}", "export X={}", "{{\"v\": \"{}\"}}", "**{}**"]
_catalog = "\n".join(_places[i % len(_places)].format(p) for i, p in enumerate(_positives))
for _i, _markup in enumerate(MARKUPS):
    _part = _catalog.split("\n")[_i::len(MARKUPS)]
    put("outbound", f"catalog_{_markup}", pipe(_markup, "utf16", 4000, 255, "\n".join(_part) + "\n"))
    put("outbound", f"catalog_{_markup}_small", pipe(_markup, "chars", 48, 255, "\n".join(_part[:40]) + "\n"))
put("outbound", "generic_shapes", pipe("markdown", "utf16", 2000, 50,
    "db_password = hunter2x\n\"api_key\": \"q8Zp2vR7kW3mN9xT4c\"\nmysql -u root -phunter2x db\n"
    "psql --password=Pa55w0rd9 -h db\nServer=db;Password=Pa55w0rd9;\nCookie: session=8f2a9c1e7b6d4f3a\n"
    "token \u2060ghp_jlKcHhK35KZs\u200bZs4i1DTTXlfA9IgGgRs2TpI56 and TOKEN_TTL_SECONDS=3600\n"))
put("outbound", "zero_limit", pipe("markdown", "chars", 0, 0, "hello **world**"))
put("outbound", "long_word", pipe("html", "utf16", 64, 10, "x" * 700 + " &amp; <b>not a tag</b>"))

# --- agent link (from the extension) and pi RPC lines ---
link = ['{"type":"hello","protocol":1,"extension":"0.1.0","pi":"0.73.1","session":{"key":"abc","name":"work","cwd":"/w"}}',
        '{"type":"turn_started","origin":"remote"}', '{"type":"tool_finished","name":"bash","ok":false}',
        '{"type":"assistant_message","text":"hi"}', '{"type":"turn_settled"}', '{"type":"last_prompt","text":"x"}',
        '{"type":"tool_call","id":"t1","name":"bash"}', '{"type":"command","id":"c1","args":"status"}',
        '{"type":"prompt_result","id":"p1","ok":false,"error":"busy"}', '{"type":"shell_run","command":"ls","failed":true,"output":"x"}',
        '{"type":"turn_started","origin":"sk-ant-api03-Zk3vQ9xLp2mN8rT4wY6uB1"}', '{"type":"teleport"}']
for i, line in enumerate(link):
    put("agent_link_line", f"line{i:02}", line)
rpc = ['{"id":"p1","type":"response","command":"prompt","success":true}',
       '{"type":"response","command":"prompt","success":false,"error":"Agent is already processing."}',
       '{"type":"response","command":"get_state","success":true,"data":{"sessionId":"s1","sessionName":"work","isStreaming":true}}',
       '{"type":"tool_execution_start","toolCallId":"call_fake_1","toolName":"bash","args":{"command":"echo hi"}}',
       '{"type":"tool_execution_end","toolCallId":"c2","toolName":"bash","result":{"content":[{"type":"text","text":"blocked"}]},"isError":true}',
       '{"type":"message_end","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"one"},{"type":"toolCall","id":"c","name":"bash","arguments":{}},{"type":"text","text":"two"}],"stopReason":"stop"}}',
       '{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"Connection error."}}',
       '{"type":"message_start","message":{"role":"user","content":"plain string"}}',
       '{"type":"extension_ui_request","id":"u1","method":"input","title":"t","placeholder":"{}","timeout":5000}',
       '{"type":"extension_ui_request","id":"u2","method":"confirm","title":"Probe?","message":"Send?"}',
       '{"type":"extension_ui_request","id":"u3","method":"notify","message":"hi","notifyType":"warning"}',
       '{"type":"extension_ui_request","id":"u4","method":"setStatus","statusKey":"k"}',
       '{"type":"message_update","assistantMessageEvent":{"type":"text_delta"}}',
       '{"type":"agent_end","messages":[]}\r', '{"type":"auto_retry_end","success":true}',
       '{"type":"extension_error","extensionPath":"/x.ts","event":"e","error":"boom"}', '{"type":3}']
for i, line in enumerate(rpc):
    put("pi_rpc_line", f"line{i:02}", line)
put("json_lines", "rpc_stream", bytes([0x3f]) + "\n".join(rpc[:6]).encode() + b"\r\n")
put("json_lines", "link_stream_small_buffer", bytes([0x3f]) + "\n".join(link[:5]).encode())
put("json_lines", "too_long", bytes([0xc8]) + b"short\n" + b"x" * 40 + b"\r\nok\r\n\xff\xfe\n")

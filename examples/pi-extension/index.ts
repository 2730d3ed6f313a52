/**
 * bot-connect for pi: steer this live pi session from a messenger.
 *
 * A thin extension. It starts `host-shim attach` for its session (the bridge, its
 * sandbox and the messenger transports all live there), forwards pi's events to it over
 * a Unix socket, and carries out what the host asks: inject a prompt, abort, notify,
 * confirm, give a tool-call verdict, answer a `/connect …` command. The link protocol
 * is written down in PROTOCOL.md next to this file.
 *
 * Under `host-shim run --agent pi` the same file is loaded into an rpc-mode pi with
 * PI_BOT_CONNECT_RPC_GATE=1: then it only gates tool calls, through pi's RPC
 * extension-UI dialogs (host-shim drives everything else over RPC).
 *
 * Nothing here may take pi down: every failure becomes a notification, and a tool call
 * of a messenger-started turn that cannot be checked is blocked with a reason.
 */

import { type ExtensionAPI, type ExtensionContext, VERSION as PI_VERSION } from "@mariozechner/pi-coding-agent";
import { Type } from "@sinclair/typebox";
import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const EXTENSION_VERSION = "0.1.0";
/** Agent-link protocol version (PROTOCOL.md). */
const PROTOCOL = 1;
/** Tool-gate document version (rpc mode). */
const GATE_VERSION = 1;
const GATE_TITLE = "bot-connect:tool-call";
const GATE_STATUS_KEY = "bot-connect-gate";

function envMs(name: string, fallback: number): number {
	const value = Number(process.env[name]);
	return Number.isFinite(value) && value > 0 ? value : fallback;
}

/** How long a tool call waits for the bridge's verdict (a local approval may take 60 s). */
const VERDICT_TIMEOUT_MS = envMs("PI_BOT_CONNECT_VERDICT_TIMEOUT_MS", 90_000);
/** How long `host-shim attach` may take to say where it listens. */
const START_TIMEOUT_MS = envMs("PI_BOT_CONNECT_START_TIMEOUT_MS", 30_000);
/** How long a request to the host (command, prompt delivery) may take. */
const REQUEST_TIMEOUT_MS = 30_000;
/** How long `send_file` waits for the upload (a file of megabytes over a slow uplink). */
const SEND_FILE_TIMEOUT_MS = envMs("PI_BOT_CONNECT_SEND_FILE_TIMEOUT_MS", 180_000);
/** The rpc-mode dialog title host-shim answers `send_file` on (see installGate). */
const SEND_FILE_TITLE = "bot-connect:send-file";
/** Most bytes of host-shim's stderr kept for a crash report. */
const STDERR_TAIL = 4096;
/** Longest line accepted from the host. */
const MAX_LINE = 16 * 1024 * 1024;

export default function (pi: ExtensionAPI) {
	if (process.env.PI_BOT_CONNECT_RPC_GATE === "1") {
		installGate(pi);
	} else {
		installLink(pi);
	}
}

// ---------------------------------------------------------------------------------------
// `send_file`: the agent sends a file to the chat that asked (docs/media.md#files-out)

const SEND_FILE_DESCRIPTION =
	"Send a file from the working directory (a report, an image, a log) to the messenger chat " +
	"that asked for it, through bot-connect. Text files are redacted of secrets first; a binary " +
	"file holding a secret is refused; platform size limits apply. The result says where it went " +
	"or why it was not sent.";

/**
 * Registers `send_file`; `deliver` asks the bridge and resolves with whether the file went
 * out and what the agent is told. The bridge does every check: this only carries the request.
 */
function registerSendFile(pi: ExtensionAPI, deliver: (path: string, caption: string | undefined) => Promise<{ ok: boolean; text: string }>) {
	pi.registerTool({
		name: "send_file",
		label: "Send file",
		description: SEND_FILE_DESCRIPTION,
		parameters: Type.Object({
			path: Type.String({ description: "The file to send, relative to the working directory" }),
			caption: Type.Optional(Type.String({ description: "A short text shown with the file" })),
		}),
		async execute(_toolCallId: string, params: any) {
			const path = String(params?.path ?? "");
			const caption = typeof params?.caption === "string" && params.caption.trim() ? params.caption : undefined;
			const answer = await deliver(path, caption);
			if (!answer.ok) throw new Error(answer.text);
			return { content: [{ type: "text" as const, text: answer.text }], details: {} };
		},
	} as any);
}

// ---------------------------------------------------------------------------------------
// Tool gate for `host-shim run --agent pi` (pi's RPC mode has no tool-call hook)

function installGate(pi: ExtensionAPI) {
	let current: ExtensionContext | undefined;
	// In rpc mode the extension's only way to host-shim is pi's extension-UI dialogs: the
	// request goes out as an `input` dialog that host-shim answers with the bridge's result.
	registerSendFile(pi, async (path, caption) => {
		const c = current;
		if (!c) return { ok: false, text: "bot-connect: the pi session has not started yet" };
		let answer: string | undefined;
		try {
			answer = await c.ui.input(SEND_FILE_TITLE, JSON.stringify({ v: GATE_VERSION, path, caption }), {
				timeout: SEND_FILE_TIMEOUT_MS,
			});
		} catch (error) {
			return { ok: false, text: `bot-connect could not send the file (${describe(error)})` };
		}
		if (answer === undefined) {
			return { ok: false, text: `bot-connect did not answer within ${SEND_FILE_TIMEOUT_MS / 1000} s; the file may not have been sent` };
		}
		try {
			const parsed = JSON.parse(answer);
			return { ok: parsed?.ok === true, text: String(parsed?.text ?? "") };
		} catch {
			return { ok: false, text: "bot-connect sent an unreadable answer" };
		}
	});
	pi.on("session_start", async (_event, ctx) => {
		current = ctx;
		// host-shim refuses remote prompts until it has seen this: the policy is enforced.
		ctx.ui.setStatus(GATE_STATUS_KEY, `gate v${GATE_VERSION}`);
	});
	pi.on("tool_call", async (event, ctx) => {
		const request = JSON.stringify({
			v: GATE_VERSION,
			tool: event.toolName,
			input: judgedArgs(event.toolName, event.input, ctx.cwd),
		});
		let answer: string | undefined;
		try {
			answer = await ctx.ui.input(GATE_TITLE, request, { timeout: VERDICT_TIMEOUT_MS });
		} catch (error) {
			return block(`bot-connect could not ask for a verdict (${describe(error)})`);
		}
		if (answer === undefined) {
			return block(`bot-connect gave no verdict within ${VERDICT_TIMEOUT_MS / 1000} s`);
		}
		return verdictFrom(answer, event);
	});
}

/**
 * Sets the arguments a narrowed verdict names (a search's exclusion glob) on the call
 * before it runs. Only a glob argument of the call's own tool may be set: a verdict that
 * names anything else is refused, so no answer can rewrite a path or a command.
 */
function applySet(set: unknown, event: { toolName: string; input: unknown }): { block: true; reason: string } | undefined {
	if (set === undefined || set === null) return undefined;
	const allowed = (JUDGED_ARGS[event.toolName] ?? []).filter((key) => GLOB_ARGS.has(key));
	if (typeof set !== "object" || typeof event.input !== "object" || event.input === null) {
		return block("bot-connect sent a verdict this extension cannot apply");
	}
	const entries = Object.entries(set as Record<string, unknown>);
	if (entries.some(([key, value]) => !allowed.includes(key) || typeof value !== "string")) {
		return block("bot-connect sent a verdict this extension cannot apply");
	}
	for (const [key, value] of entries) (event.input as Record<string, unknown>)[key] = value;
	return undefined;
}

function verdictFrom(answer: string, event: { toolName: string; input: unknown }): { block: true; reason: string } | undefined {
	let parsed: any;
	try {
		parsed = JSON.parse(answer);
	} catch {
		return block("bot-connect sent an unreadable verdict");
	}
	if (parsed?.verdict === "allow") return applySet(parsed.set, event);
	if (parsed?.verdict === "block") {
		return { block: true, reason: String(parsed.reason ?? "blocked by bot-connect") };
	}
	return block("bot-connect sent an unknown verdict");
}

/** Longest path or glob passed on, once resolved: a real one is far shorter. */
const MAX_ARG_CHARS = 4096;

/**
 * The arguments of pi's own tools that name what a call touches: paths and grep's glob.
 * Never contents: `write`'s `content`, `edit`'s texts and search patterns stay here.
 */
const JUDGED_ARGS: Record<string, string[]> = {
	read: ["path"],
	write: ["path"],
	edit: ["path"],
	ls: ["path"],
	find: ["path"],
	grep: ["path", "glob"],
	bash: [],
};

/** Argument names that hold paths in tools this file does not know (host-shim reads the same). */
const PATH_KEYS = [
	"path", "paths", "file", "files", "file_path", "filePath", "filename",
	"dir", "directory", "target", "source", "destination",
];

/** Arguments that hold a glob, not a path: sent as written. */
const GLOB_ARGS = new Set(["glob"]);

/**
 * A path as pi's tools resolve it (`resolveToCwd`): a leading `@` dropped, Unicode spaces
 * made plain, `~` expanded, then made absolute against the working directory. Resolving
 * here turns `./././…/.ssh/id_ed25519` into the short path it is before its length counts.
 */
function resolveLikePi(written: string, cwd: string): string {
	let p = written.startsWith("@") ? written.slice(1) : written;
	p = p.replace(/[\u00A0\u2000-\u200A\u202F\u205F\u3000]/g, " ");
	if (p === "~") p = os.homedir();
	else if (p.startsWith("~/")) p = os.homedir() + p.slice(1);
	return path.resolve(cwd, p);
}

/**
 * What host-shim needs to judge a remote call's scope: its paths, resolved as pi resolves
 * them, and grep's glob. An argument that should be a path but cannot be sent (too long
 * even resolved, not text) goes as a mark, never left out: the bridge then refuses the
 * call (a missing path would have looked like a call that touches nothing).
 */
function judgedArgs(tool: string, input: unknown, cwd: string): Record<string, unknown> {
	const out: Record<string, unknown> = {};
	if (typeof input !== "object" || input === null) return out;
	const args = input as Record<string, unknown>;
	const one = (key: string, value: unknown): unknown => {
		if (typeof value !== "string") return { unjudgeable: `not text (${typeof value})` };
		const sent = GLOB_ARGS.has(key) ? value : resolveLikePi(value, cwd);
		return sent.length <= MAX_ARG_CHARS ? sent : { unjudgeable: `${sent.length} characters` };
	};
	for (const key of JUDGED_ARGS[tool] ?? PATH_KEYS) {
		const value = args[key];
		if (value === undefined || value === null) continue;
		if (Array.isArray(value)) {
			const items = value.map((item) => one(key, item));
			out[key] = items.every((item) => typeof item === "string") ? items : one(key, value);
		} else {
			out[key] = one(key, value);
		}
	}
	return out;
}

function block(why: string): { block: true; reason: string } {
	return { block: true, reason: `${why}; the tool was blocked. Run it locally if it is needed.` };
}

/**
 * Text as the terminal may show it. Chat ids, names and room ids reach local notices,
 * and a terminal obeys what is in them: an escape sequence (an OSC 52 clipboard write,
 * a screen clear), other control characters, bidi overrides that reorder what is read,
 * and zero-width characters that hide what is there. Line breaks and tabs stay.
 */
function plainForTerminal(text: string): string {
	return text
		.replace(/\u2028|\u2029/g, "\n")
		.replace(/[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u061C\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/g, "");
}

function describe(error: unknown): string {
	return error instanceof Error ? error.message : String(error);
}

// ---------------------------------------------------------------------------------------
// Finding host-shim

/** What to do when no host-shim is found: the one command that installs it. */
const INSTALL_HINT =
	"host-shim is not installed: run `cargo install --path host-shim` in your bot-connect checkout (it puts host-shim on PATH), or set PI_BOT_CONNECT_HOST_SHIM=/path/to/host-shim";

function isExecutable(file: string): boolean {
	try {
		fs.accessSync(file, fs.constants.X_OK);
		return fs.statSync(file).isFile();
	} catch {
		return false;
	}
}

/** The directory this file was loaded from (pi loads it through jiti, as an ES module). */
function ownDirectory(): string | undefined {
	try {
		return path.dirname(fileURLToPath(import.meta.url));
	} catch {
		return undefined;
	}
}

/**
 * The host-shim to start: `PI_BOT_CONNECT_HOST_SHIM`; else one next to this file (a release
 * unpacked beside it, or the checkout's own `target/release` and `target/debug` when pi was
 * pointed at `examples/pi-extension`); else `host-shim` on PATH. Undefined when there is
 * none, so the person is told how to get it instead of reading a spawn error.
 */
export function findHostShim(env: NodeJS.ProcessEnv = process.env, here = ownDirectory()): string | undefined {
	const named = env.PI_BOT_CONNECT_HOST_SHIM;
	if (named) return named;
	const beside = here
		? [
				path.join(here, "host-shim"),
				path.join(here, "bin", "host-shim"),
				path.join(here, "..", "..", "target", "release", "host-shim"),
				path.join(here, "..", "..", "target", "debug", "host-shim"),
			]
		: [];
	const onPath = (env.PATH ?? "")
		.split(path.delimiter)
		.filter((dir) => dir !== "")
		.map((dir) => path.join(dir, "host-shim"));
	return [...beside, ...onPath].find(isExecutable);
}

// ---------------------------------------------------------------------------------------
// The live session: link to `host-shim attach`

type Level = "info" | "warning" | "error";

/** Who started a pi run: the terminal, a messenger, or nobody we saw (checked as remote). */
type Origin = "local" | "remote" | "unknown";

interface Pending<T> {
	resolve: (value: T) => void;
	timer: ReturnType<typeof setTimeout>;
}

/** Text parts of a message's content. */
function visibleText(content: unknown): string {
	if (typeof content === "string") return content;
	if (!Array.isArray(content)) return "";
	return content
		.filter((part: any) => part?.type === "text" && typeof part.text === "string")
		.map((part: any) => part.text)
		.join("\n");
}

function level(value: unknown): Level {
	return value === "error" || value === "warning" ? value : "info";
}

/** The card line a notify, status or widget stands for; undefined when it shows no text. */
function noticeText(method: "notify" | "setStatus" | "setWidget", args: any[]): string | undefined {
	if (method === "notify") return String(args[0] ?? "");
	if (method === "setStatus") return args[1] === undefined ? "" : String(args[1]);
	const content = args[1];
	if (content === undefined) return "";
	if (!Array.isArray(content)) return undefined; // a component: nothing a chat can show
	return String(content.find((line: unknown) => typeof line === "string" && line.trim() !== "") ?? "");
}

/** Marks pi's `ui` object once its dialogs are wrapped, so a second session start does not wrap twice. */
const WRAPPED = Symbol.for("bot-connect.questions");

/** Tokens and cost as the link's `session_result` carries them (PROTOCOL.md). */
type Tokens = { input: number; output: number; cacheRead: number; cacheWrite: number; costMicros?: number };

function emptyTokens(): Tokens {
	return { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 };
}

/** Adds one message's `usage` (pi's counts and `cost.total` in dollars) to `sum`. */
function addTokens(sum: Tokens, usage: any) {
	if (!usage || typeof usage !== "object") return;
	const count = (value: unknown) => (typeof value === "number" && Number.isFinite(value) && value > 0 ? Math.round(value) : 0);
	sum.input += count(usage.input);
	sum.output += count(usage.output);
	sum.cacheRead += count(usage.cacheRead);
	sum.cacheWrite += count(usage.cacheWrite);
	const cost = usage.cost?.total;
	if (typeof cost === "number" && Number.isFinite(cost) && cost >= 0) {
		sum.costMicros = (sum.costMicros ?? 0) + Math.round(cost * 1_000_000);
	}
}

function installLink(pi: ExtensionAPI) {
	const command = process.env.PI_BOT_CONNECT_COMMAND || "connect";

	let ctx: ExtensionContext | undefined;
	let session: { key: string; name?: string; cwd: string } | undefined;
	let child: ChildProcess | undefined;
	let socket: net.Socket | undefined;
	/** The host answered our hello: messages may flow. */
	let linked = false;
	/** We are stopping on purpose: exits and closes are not crashes. */
	let stopping = false;
	let stderrTail = "";
	let nextId = 1;
	const pendingVerdicts = new Map<string, Pending<{ block: true; reason: string } | undefined>>();
	/** The calls waiting for a verdict, so a narrowed one can set their arguments. */
	const pendingCalls = new Map<string, { toolName: string; input: unknown }>();
	const pendingCommands = new Map<string, Pending<{ level: Level; text: string }>>();
	/** `send_file` requests waiting for the bridge's answer. */
	const pendingFiles = new Map<string, Pending<{ ok: boolean; text: string }>>();
	/** Questions of a remote turn asked in pi and in the chats, by id: the chats' answer. */
	const pendingQuestions = new Map<string, (answer: any) => void>();
	/**
	 * pi's own dialogs and notices, unwrapped: the bridge's approval confirm must never become a
	 * question, and its own notices (pairing codes among them) must never reach a chat.
	 */
	let localDialogs: { select?: Function; confirm?: Function; input?: Function; notify?: Function } = {};

	// Remote-turn tracking. A run (agent_start … agent_end) is remote when a prompt this
	// extension injected started it, or when such a prompt was delivered into it
	// (steer / follow-up). From then until agent_end every tool call is checked.
	//
	// pi also starts runs with no input at all: an automatic retry after a provider error
	// (overloaded, rate limit, 5xx, network) and the continuation after a compaction. Such a
	// run carries on the conversation of the run before it, so it inherits that run's
	// origin: classing it local would let a messenger's prompt run its tools unchecked on
	// the retry. A remote origin therefore lasts until a local input is seen, and a run
	// whose origin is not known (no input and no run before it) is checked as remote.
	const injected: string[] = []; // injected prompts whose `input` has not fired yet
	/** Origin of the input that will start the next run; undefined when none was seen. */
	let nextRunOrigin: Origin | undefined;
	/** Origin of the last run, carried into a run that starts without input. */
	let lastRunOrigin: Origin = "unknown";
	let runOpen = false;
	let runOrigin: Origin = "unknown";
	/** The run began with its own prompt (a user message_start that is not a delivery). */
	let runHasOwnPrompt = false;
	let userMessagesInRun = 0;
	// Prompts queued while pi worked. Kept across runs: a retry or a compaction's
	// continuation delivers them in a run of its own.
	let queuedRemote: string[] = [];
	let queuedLocal: string[] = [];
	const bashCommands = new Map<string, string>();
	/** Tokens and cost of the run in progress, and of the last finished one (`/usage`). */
	let turnUsage = emptyTokens();
	let lastTurnUsage: Tokens | undefined;

	const notify = (text: string, lvl: Level = "info") => {
		try {
			const show = localDialogs.notify ?? ctx?.ui.notify.bind(ctx?.ui);
			show?.(`[bot-connect] ${plainForTerminal(text)}`, lvl);
		} catch {
			// A stale context after a session switch: nothing left to show it on.
		}
	};

	const send = (message: Record<string, unknown>) => {
		if (!socket || !linked) return false;
		try {
			socket.write(`${JSON.stringify(message)}\n`);
			return true;
		} catch {
			return false;
		}
	};

	/** Every waiting tool call and command learns that the host is gone. */
	const failPending = (why: string) => {
		for (const [id, p] of pendingVerdicts) {
			clearTimeout(p.timer);
			p.resolve(block(why));
			pendingVerdicts.delete(id);
			pendingCalls.delete(id);
		}
		for (const [id, p] of pendingCommands) {
			clearTimeout(p.timer);
			p.resolve({ level: "error", text: `bot-connect: ${why}.` });
			pendingCommands.delete(id);
		}
		for (const [id, p] of pendingFiles) {
			clearTimeout(p.timer);
			p.resolve({ ok: false, text: `bot-connect: ${why}; the file may not have been sent.` });
			pendingFiles.delete(id);
		}
		// A question's dialog in pi stays open: the person there can still answer it.
		pendingQuestions.clear();
	};

	const linkDown = (why: string, report: boolean) => {
		const wasLinked = linked || socket !== undefined;
		linked = false;
		socket?.destroy();
		socket = undefined;
		failPending(why);
		if (report && wasLinked && !stopping) {
			notify(`${why}. Remote control is off; run /${command} to start it again.`, "error");
		}
	};

	const onHostMessage = (message: any) => {
		switch (message?.type) {
			case "hello":
				linked = true;
				return;
			case "hello_rejected":
				notify(`host-shim refused this session: ${message.reason ?? "no reason given"}`, "error");
				stopping = true;
				linkDown("host-shim refused the link", false);
				return;
			case "prompt":
				return injectPrompt(message);
			case "abort":
				try {
					ctx?.abort();
				} catch (error) {
					notify(`could not abort: ${describe(error)}`, "error");
				}
				return;
			case "notify":
				return notify(String(message.text ?? ""), level(message.level));
			case "confirm":
				return confirm(message);
			case "tool_verdict": {
				const pending = pendingVerdicts.get(String(message.id));
				if (!pending) return;
				pendingVerdicts.delete(String(message.id));
				clearTimeout(pending.timer);
				const call = pendingCalls.get(String(message.id));
				pendingCalls.delete(String(message.id));
				pending.resolve(
					message.verdict === "allow"
						? call
							? applySet(message.set, call)
							: block("bot-connect answered a call this extension no longer holds")
						: { block: true, reason: String(message.reason ?? "blocked by bot-connect") },
				);
				return;
			}
			case "question_answer": {
				const answered = pendingQuestions.get(String(message.id));
				if (!answered) return;
				pendingQuestions.delete(String(message.id));
				answered(message);
				return;
			}
			case "session_command":
				return void runSessionCommand(message);
			case "send_file_result": {
				const pending = pendingFiles.get(String(message.id));
				if (!pending) return;
				pendingFiles.delete(String(message.id));
				clearTimeout(pending.timer);
				pending.resolve({ ok: message.ok === true, text: String(message.text ?? "") });
				return;
			}
			case "command_result": {
				const pending = pendingCommands.get(String(message.id));
				if (!pending) return;
				pendingCommands.delete(String(message.id));
				clearTimeout(pending.timer);
				pending.resolve({ level: level(message.level), text: String(message.text ?? "") });
				return;
			}
			default:
				// A newer host may send more; ignoring unknown messages keeps this version working.
				return;
		}
	};

	/**
	 * A session command from a chat (`/new`, `/compact`, `/model`, `/thinking`, `/usage`),
	 * through pi's extension API; answered with `session_result`.
	 */
	const runSessionCommand = async (message: any) => {
		const id = String(message.id ?? "");
		const arg = typeof message.arg === "string" && message.arg.trim() ? message.arg.trim() : undefined;
		const answer = (result: Record<string, unknown>) => send({ type: "session_result", id, ...result });
		const fail = (error: string) => answer({ ok: false, error });
		const c = ctx;
		if (!c) return fail("the pi session has not started yet");
		try {
			switch (message.command) {
				case "new_session":
					// pi's extension API starts a session only from a command typed in pi
					// (ExtensionCommandContext.newSession); a message from the link has none.
					return fail("pi starts a new session only from its own terminal here: type /new in pi (headless `run --agent pi` can do it from the chat)");
				case "compact":
					return c.compact({
						customInstructions: arg,
						onComplete: (result: any) =>
							answer({
								ok: true,
								text:
									typeof result?.tokensBefore === "number"
										? `Compacted: the conversation so far (${result.tokensBefore} tokens) is now a summary.`
										: "Compacted: the conversation so far is now a summary.",
							}),
						onError: (error: Error) => fail(`compaction failed: ${describe(error)}`),
					});
				case "list_models": {
					const models = await c.modelRegistry.getAvailable();
					return answer({
						ok: true,
						current: c.model ? `${c.model.provider}/${c.model.id}` : undefined,
						models: models.map((m: any) => `${m.provider}/${m.id}`),
					});
				}
				case "set_model": {
					const models: any[] = await c.modelRegistry.getAvailable();
					const wanted = String(arg ?? "").toLowerCase();
					const exact = models.filter((m) => `${m.provider}/${m.id}`.toLowerCase() === wanted);
					const byId = models.filter((m) => String(m.id).toLowerCase() === wanted);
					const found = exact.length === 1 ? exact : byId;
					if (found.length !== 1) {
						return fail(
							found.length === 0
								? `pi has no model '${arg ?? ""}'; send /model to see the ones it has`
								: `'${arg}' is offered by several providers (${found.map((m) => `${m.provider}/${m.id}`).join(", ")}); name it as provider/id`,
						);
					}
					const model = found[0];
					if (!(await pi.setModel(model))) return fail(`pi has no API key for ${model.provider}/${model.id}`);
					return answer({ ok: true, text: `Model: ${model.provider}/${model.id}` });
				}
				case "thinking": {
					const levels = ["off", "minimal", "low", "medium", "high", "xhigh"];
					if (arg !== undefined) {
						const level = arg.toLowerCase();
						if (!levels.includes(level)) return fail(`'${arg}' is no thinking level; pi knows ${levels.join(", ")}`);
						pi.setThinkingLevel(level as any);
						const now = pi.getThinkingLevel();
						return answer({
							ok: true,
							text:
								now === level
									? `Thinking level: ${now}`
									: `Thinking level: ${now} (pi did not take '${level}': this model does not support it)`,
						});
					}
					return answer({ ok: true, text: `Thinking level: ${pi.getThinkingLevel()}` });
				}
				case "usage": {
					const session = emptyTokens();
					for (const entry of c.sessionManager.getBranch() as any[]) {
						if (entry?.type === "message" && entry.message?.role === "assistant") addTokens(session, entry.message.usage);
					}
					const context = c.getContextUsage();
					return answer({
						ok: true,
						usage: {
							session,
							lastTurn: lastTurnUsage,
							contextTokens: typeof context?.tokens === "number" ? Math.round(context.tokens) : undefined,
							contextWindow: context?.contextWindow,
						},
					});
				}
				default:
					return fail(`this extension does not know the session command ${JSON.stringify(String(message.command))}; update it`);
			}
		} catch (error) {
			return fail(describe(error));
		}
	};

	const injectPrompt = (message: any) => {
		const text = String(message.text ?? "");
		const images = Array.isArray(message.images) ? message.images : [];
		const content =
			images.length === 0
				? text
				: [
						{ type: "text" as const, text },
						...images.map((image: any) => ({
							type: "image" as const,
							data: String(image.data ?? ""),
							mimeType: String(image.mimeType ?? "image/png"),
						})),
					];
		injected.push(text);
		try {
			// Always with a delivery mode: while idle pi runs it at once, while busy it
			// queues it, so an idle/busy race can never get the prompt rejected.
			pi.sendUserMessage(content as any, {
				deliverAs: message.deliverAs === "steer" ? "steer" : "followUp",
			});
			send({ type: "prompt_result", id: message.id, ok: true });
		} catch (error) {
			injected.pop();
			send({ type: "prompt_result", id: message.id, ok: false, error: describe(error) });
		}
	};

	const confirm = async (message: any) => {
		let yes = false;
		try {
			const timeout = Number(message.timeoutMs) > 0 ? Number(message.timeoutMs) : 60_000;
			const ask = localDialogs.confirm ?? ctx?.ui.confirm.bind(ctx?.ui);
			yes =
				(await ask?.(plainForTerminal(String(message.title ?? "")), plainForTerminal(String(message.message ?? "")), {
					timeout,
				})) === true;
		} catch {
			yes = false;
		}
		send({ type: "confirm_result", id: message.id, yes });
	};

	const connect = (path: string) => {
		const s = net.createConnection(path);
		socket = s;
		let buffer = "";
		s.setEncoding("utf8");
		s.on("connect", () => {
			if (!session) return;
			s.write(
				`${JSON.stringify({
					type: "hello",
					protocol: PROTOCOL,
					extension: EXTENSION_VERSION,
					pi: PI_VERSION,
					session,
				})}\n`,
			);
		});
		s.on("data", (chunk: string) => {
			buffer += chunk;
			if (buffer.length > MAX_LINE) {
				buffer = "";
				notify("host-shim sent an oversized line; it was dropped", "warning");
			}
			let newline = buffer.indexOf("\n");
			while (newline >= 0) {
				const line = buffer.slice(0, newline).replace(/\r$/, "");
				buffer = buffer.slice(newline + 1);
				if (line.trim()) {
					try {
						onHostMessage(JSON.parse(line));
					} catch (error) {
						notify(`unreadable message from host-shim ignored (${describe(error)})`, "warning");
					}
				}
				newline = buffer.indexOf("\n");
			}
		});
		s.on("error", (error: any) => {
			if (socket !== s) return;
			// A write racing the host's close (a streamed draft, say) fails with EPIPE or
			// ECONNRESET: that is the host going away, and is said as such.
			if (error?.code === "EPIPE" || error?.code === "ECONNRESET") {
				linkDown("host-shim closed the link", true);
			} else {
				linkDown(`the link to host-shim failed (${describe(error)})`, true);
			}
		});
		s.on("close", () => {
			if (socket === s) linkDown("host-shim closed the link", true);
		});
	};

	const startHost = (): Promise<void> =>
		new Promise((resolve) => {
			if (!session) return resolve();
			stopping = false;
			const direct = process.env.PI_BOT_CONNECT_SOCKET;
			if (direct) {
				connect(direct);
				return resolve();
			}
			const program = findHostShim();
			if (!program) {
				notify(INSTALL_HINT, "error");
				return resolve();
			}
			const args = ["attach", "--session", session.key];
			let started: ChildProcess;
			try {
				started = spawn(program, args, { cwd: session.cwd, stdio: ["pipe", "pipe", "pipe"] });
			} catch (error) {
				notify(`could not start ${program} (${describe(error)}). Install host-shim or set PI_BOT_CONNECT_HOST_SHIM.`, "error");
				return resolve();
			}
			child = started;
			stderrTail = "";
			let ready = false;
			let out = "";
			const timer = setTimeout(() => {
				if (ready) return;
				notify(`host-shim did not start within ${START_TIMEOUT_MS / 1000} s${tail()}`, "error");
				started.kill();
				resolve();
			}, START_TIMEOUT_MS);
			started.stdout?.setEncoding("utf8");
			started.stdout?.on("data", (chunk: string) => {
				if (ready) return;
				out += chunk;
				const newline = out.indexOf("\n");
				if (newline < 0) return;
				ready = true;
				clearTimeout(timer);
				try {
					const hello = JSON.parse(out.slice(0, newline));
					if (hello?.type !== "ready" || typeof hello.socket !== "string") throw new Error("no socket named");
					connect(hello.socket);
				} catch (error) {
					notify(`host-shim said something unexpected at start (${describe(error)})`, "error");
				}
				resolve();
			});
			started.stderr?.setEncoding("utf8");
			started.stderr?.on("data", (chunk: string) => {
				stderrTail = (stderrTail + chunk).slice(-STDERR_TAIL);
			});
			// Without a listener a closed pipe would throw in pi.
			started.stdin?.on("error", () => {});
			started.on("error", (error) => {
				clearTimeout(timer);
				notify(`could not start ${program} (${describe(error)}). Install host-shim or set PI_BOT_CONNECT_HOST_SHIM.`, "error");
				if (child === started) child = undefined;
				resolve();
			});
			started.on("exit", (code, signal) => {
				clearTimeout(timer);
				if (child === started) child = undefined;
				if (!stopping) {
					const how = signal ? `signal ${signal}` : `code ${code}`;
					notify(`host-shim stopped unexpectedly (${how})${tail()}. Remote control is off; run /${command} to start it again.`, "error");
					linkDown("host-shim stopped", false);
				}
				resolve();
			});
		});

	const tail = () => (stderrTail.trim() ? `:\n${stderrTail.trim()}` : "");

	const stopHost = () => {
		stopping = true;
		send({ type: "bye" });
		linkDown("this pi session ended", false);
		const running = child;
		child = undefined;
		if (running) {
			// host-shim stops when its stdin closes; the kill is for one that hangs.
			running.stdin?.end();
			const timer = setTimeout(() => running.kill(), 5000);
			timer.unref?.();
			running.on("exit", () => clearTimeout(timer));
		}
	};

	// ------------------------------------------------------- questions of remote turns

	/**
	 * Another extension asks the person something (`ctx.ui.select`, `confirm`, `input`)
	 * while a messenger-started run works: the chats of that turn are asked too, and the
	 * first answer wins, in pi or from the phone (docs/pi.md#questions-pi-asks). Before, the
	 * dialog opened in pi alone and the chat that started the turn waited on a card that
	 * never moved. pi hands every extension the same `ui` object, so wrapping its dialogs
	 * here reaches every extension's questions. `editor` stays pi's own: its dialog cannot
	 * be closed from outside once the phone has answered.
	 */
	const wrapDialogs = (ui: any) => {
		if (!ui || ui[WRAPPED]) return;
		const originals: typeof localDialogs = {};
		for (const method of ["select", "confirm", "input"] as const) {
			const local = ui[method];
			if (typeof local !== "function") continue;
			const own = local.bind(ui);
			originals[method] = own;
			ui[method] = (title: unknown, second: unknown, opts?: any) => askBoth(method, own, title, second, opts);
		}
		// Another extension's notify, status or widget during a remote run: the card's one
		// notice line (the host keeps only the latest), never a message of its own.
		for (const method of ["notify", "setStatus", "setWidget"] as const) {
			const local = ui[method];
			if (typeof local !== "function") continue;
			const own = local.bind(ui);
			if (method === "notify") originals.notify = own;
			ui[method] = (...args: any[]) => {
				const result = own(...args);
				if (linked && runOpen && runOrigin !== "local") {
					const text = noticeText(method, args);
					if (text !== undefined) send({ type: "notice", text });
				}
				return result;
			};
		}
		ui[WRAPPED] = true;
		localDialogs = originals;
	};

	const askBoth = (method: "select" | "confirm" | "input", local: Function, title: unknown, second: unknown, opts?: any): Promise<any> => {
		// Local runs are the person's own: their questions stay in pi.
		if (!linked || !runOpen || runOrigin === "local") return local(title, second, opts);
		const id = `q${nextId++}`;
		const closeLocal = new AbortController();
		const outer: AbortSignal | undefined = opts?.signal;
		if (outer?.aborted) return local(title, second, opts);
		outer?.addEventListener("abort", () => closeLocal.abort(), { once: true });
		const question = {
			type: "question",
			id,
			method,
			title: String(title ?? ""),
			message: method === "select" ? "" : String(second ?? ""),
			options: method === "select" && Array.isArray(second) ? second.map(String) : [],
			timeoutMs: Number(opts?.timeout) > 0 ? Number(opts.timeout) : undefined,
		};
		return new Promise((resolve) => {
			let done = false;
			const finish = (value: unknown) => {
				if (done) return;
				done = true;
				pendingQuestions.delete(id);
				closeLocal.abort();
				resolve(value);
			};
			pendingQuestions.set(id, (answer: any) => {
				if (answer?.cancelled === true) return finish(method === "confirm" ? false : undefined);
				if (method === "confirm") return finish(answer?.confirmed === true);
				finish(typeof answer?.value === "string" ? answer.value : undefined);
			});
			if (!send(question)) {
				pendingQuestions.delete(id);
				done = true;
				local(title, second, opts).then(resolve, () => resolve(method === "confirm" ? false : undefined));
				return;
			}
			Promise.resolve(local(title, second, { ...opts, signal: closeLocal.signal })).then(
				(value: unknown) => {
					if (done) return;
					// Answered (or dismissed) in pi first: the chats hear so.
					const answer =
						method === "confirm"
							? { confirmed: value === true }
							: typeof value === "string"
								? { value }
								: { cancelled: true };
					send({ type: "question_answered", id, ...answer });
					finish(value);
				},
				() => finish(method === "confirm" ? false : undefined),
			);
		});
	};

	// ------------------------------------------------------------- pi events -> host

	pi.on("session_start", async (_event, c) => {
		ctx = c;
		wrapDialogs(c.ui);
		// A new or switched session continues nothing of the last one's runs.
		nextRunOrigin = undefined;
		lastRunOrigin = "unknown";
		queuedRemote = [];
		queuedLocal = [];
		const manager: any = c.sessionManager;
		session = {
			key: manager.getSessionId?.() || manager.getSessionFile?.() || "ephemeral",
			name: pi.getSessionName() || undefined,
			cwd: c.cwd,
		};
		await startHost();
	});

	pi.on("session_shutdown", async () => {
		stopHost();
	});

	pi.on("input", async (event, c) => {
		ctx = c;
		let remote = false;
		if (event.source === "extension" && injected.length > 0) {
			// Ours, unless another extension injected at the same moment; a transform by
			// an earlier handler can change the text, so an unmatched one still counts
			// as ours (fail closed: remote turns are the restricted ones).
			const at = injected.indexOf(event.text);
			injected.splice(at >= 0 ? at : 0, 1);
			remote = true;
		}
		if (c.isIdle()) {
			nextRunOrigin = remote ? "remote" : "local";
		} else if (remote) {
			queuedRemote.push(event.text);
		} else {
			queuedLocal.push(event.text);
		}
		return { action: "continue" as const };
	});

	pi.on("before_agent_start", async (event) => {
		send({ type: "last_prompt", text: String(event.prompt ?? "") });
	});

	pi.on("agent_start", async (_event, c) => {
		ctx = c;
		turnUsage = emptyTokens();
		runOpen = true;
		runHasOwnPrompt = nextRunOrigin !== undefined;
		runOrigin = nextRunOrigin ?? lastRunOrigin;
		nextRunOrigin = undefined;
		lastRunOrigin = runOrigin;
		userMessagesInRun = 0;
		// An unknown origin is reported, and checked, as remote: the restricted side.
		send({ type: "turn_started", origin: runOrigin === "local" ? "local" : "remote" });
	});

	pi.on("message_start", async (event) => {
		const message: any = event.message;
		if (message?.role !== "user" || !runOpen) return;
		userMessagesInRun += 1;
		if (runHasOwnPrompt && userMessagesInRun === 1) return; // the prompt that started the run
		// A queued prompt is being delivered into the running run.
		const text = visibleText(message.content);
		send({ type: "last_prompt", text });
		let remote: boolean;
		const r = queuedRemote.indexOf(text);
		const l = queuedLocal.indexOf(text);
		if (r >= 0) {
			queuedRemote.splice(r, 1);
			remote = true;
		} else if (l >= 0) {
			queuedLocal.splice(l, 1);
			remote = false;
		} else {
			// Not one we saw typed or injected (another extension's message, or a text
			// changed on its way): remote if any remote prompt waits, the strict side.
			remote = queuedRemote.length > 0 || runOrigin !== "local";
			if (queuedRemote.length > 0) queuedRemote.shift();
		}
		if (remote && runOrigin !== "remote") {
			// The rest of the run answers a messenger: its own turn, with the policy.
			runOrigin = "remote";
			lastRunOrigin = "remote";
			send({ type: "turn_settled" });
			send({ type: "turn_started", origin: "remote" });
		}
	});

	pi.on("tool_execution_start", async (event) => {
		if (event.toolName === "bash" && typeof event.args?.command === "string") {
			bashCommands.set(event.toolCallId, event.args.command);
		}
		send({ type: "tool_started", name: event.toolName });
	});

	pi.on("tool_execution_end", async (event) => {
		send({ type: "tool_finished", name: event.toolName, ok: event.isError !== true });
		const shell = bashCommands.get(event.toolCallId);
		if (shell !== undefined) {
			bashCommands.delete(event.toolCallId);
			send({
				type: "shell_run",
				command: shell,
				failed: event.isError === true,
				output: visibleText(event.result?.content).slice(-64 * 1024),
			});
		}
	});

	// The answer as it is written, a few times a second at most (the bridge shows it only
	// with bridge.streamPreview, and edits a card once a second by default).
	let lastDraftAt = 0;
	pi.on("message_update", async (event) => {
		const message: any = event.message;
		if (message?.role !== "assistant" || !runOpen) return;
		const now = Date.now();
		if (now - lastDraftAt < 250) return;
		lastDraftAt = now;
		send({ type: "assistant_draft", text: visibleText(message.content) });
	});

	pi.on("message_end", async (event) => {
		const message: any = event.message;
		if (message?.role !== "assistant") return;
		addTokens(turnUsage, message.usage);
		const text = visibleText(message.content);
		if (text.trim()) {
			send({ type: "assistant_message", text });
		} else if (message.stopReason === "error") {
			send({ type: "assistant_message", text: `The model call failed: ${message.errorMessage ?? "no reason given"}` });
		}
	});

	pi.on("agent_end", async () => {
		// Before turn_settled: the bridge asks for the last turn's usage when it hears it.
		lastTurnUsage = turnUsage;
		runOpen = false;
		bashCommands.clear();
		send({ type: "turn_settled" });
	});

	pi.on("tool_call", async (event, c) => {
		// Local turns are never restricted (the policy is for messenger-started turns),
		// so local work never waits for the bridge. A call outside any run, or in a run of
		// unknown origin, is checked: only a run known to be local skips the bridge.
		if (runOpen && runOrigin === "local") return undefined;
		if (!linked) {
			return block("bot-connect is not running, so this messenger-started turn cannot be checked");
		}
		const id = `t${nextId++}`;
		return new Promise<{ block: true; reason: string } | undefined>((resolve) => {
			const timer = setTimeout(() => {
				pendingVerdicts.delete(id);
				pendingCalls.delete(id);
				resolve(block(`bot-connect gave no verdict within ${VERDICT_TIMEOUT_MS / 1000} s`));
			}, VERDICT_TIMEOUT_MS);
			pendingVerdicts.set(id, { resolve, timer });
			pendingCalls.set(id, event);
			const input = judgedArgs(event.toolName, event.input, c.cwd);
			if (!send({ type: "tool_call", id, name: event.toolName, input })) {
				clearTimeout(timer);
				pendingVerdicts.delete(id);
				pendingCalls.delete(id);
				resolve(block("the link to bot-connect is down"));
			}
		});
	});

	// -------------------------------------------------------------- /connect …

	pi.registerCommand(command, {
		description:
			"Local control for the messenger bridge (status, doctor, version, pair, digest, pause, resume, disconnect)",
		handler: async (args, c) => {
			ctx = c;
			if (!linked) {
				// Not linked yet: start host-shim only if no start is already under way
				// (a second one would find this session served and be refused).
				if (!child && !socket) {
					notify("starting host-shim…");
					await startHost();
				}
				await waitForLink(START_TIMEOUT_MS);
			}
			if (!linked) {
				notify(`bot-connect is not running${tail()}`, "error");
				return;
			}
			const id = `c${nextId++}`;
			const answer = await new Promise<{ level: Level; text: string }>((resolve) => {
				const timer = setTimeout(() => {
					pendingCommands.delete(id);
					resolve({ level: "error", text: "bot-connect: no answer from host-shim in time." });
				}, REQUEST_TIMEOUT_MS);
				pendingCommands.set(id, { resolve, timer });
				send({ type: "command", id, args: args.trim() });
			});
			// pi's own notify: a `/connect pair` answer holds codes, and never reaches a card.
			const show = localDialogs.notify ?? c.ui.notify.bind(c.ui);
			show(plainForTerminal(answer.text), answer.level);
		},
	});

	registerSendFile(pi, (path, caption) => {
		if (!linked) {
			return Promise.resolve({ ok: false, text: "bot-connect is not running, so no chat can get the file" });
		}
		const id = `f${nextId++}`;
		return new Promise((resolve) => {
			const timer = setTimeout(() => {
				pendingFiles.delete(id);
				resolve({ ok: false, text: `bot-connect did not answer within ${SEND_FILE_TIMEOUT_MS / 1000} s; the file may not have been sent` });
			}, SEND_FILE_TIMEOUT_MS);
			pendingFiles.set(id, { resolve, timer });
			if (!send({ type: "send_file", id, path, caption })) {
				clearTimeout(timer);
				pendingFiles.delete(id);
				resolve({ ok: false, text: "bot-connect lost its link to host-shim; the file was not sent" });
			}
		});
	});

	const waitForLink = (ms: number) =>
		new Promise<void>((resolve) => {
			const started = Date.now();
			const poll = setInterval(() => {
				if (linked || Date.now() - started > ms) {
					clearInterval(poll);
					resolve();
				}
			}, 50);
		});
}

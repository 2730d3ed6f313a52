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
import { type ChildProcess, spawn } from "node:child_process";
import * as net from "node:net";

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
// Tool gate for `host-shim run --agent pi` (pi's RPC mode has no tool-call hook)

function installGate(pi: ExtensionAPI) {
	pi.on("session_start", async (_event, ctx) => {
		// host-shim refuses remote prompts until it has seen this: the policy is enforced.
		ctx.ui.setStatus(GATE_STATUS_KEY, `gate v${GATE_VERSION}`);
	});
	pi.on("tool_call", async (event, ctx) => {
		const request = JSON.stringify({ v: GATE_VERSION, tool: event.toolName, input: pathArgs(event.input) });
		let answer: string | undefined;
		try {
			answer = await ctx.ui.input(GATE_TITLE, request, { timeout: VERDICT_TIMEOUT_MS });
		} catch (error) {
			return block(`bot-connect could not ask for a verdict (${describe(error)})`);
		}
		if (answer === undefined) {
			return block(`bot-connect gave no verdict within ${VERDICT_TIMEOUT_MS / 1000} s`);
		}
		return verdictFrom(answer);
	});
}

function verdictFrom(answer: string): { block: true; reason: string } | undefined {
	let parsed: any;
	try {
		parsed = JSON.parse(answer);
	} catch {
		return block("bot-connect sent an unreadable verdict");
	}
	if (parsed?.verdict === "allow") return undefined;
	if (parsed?.verdict === "block") {
		return { block: true, reason: String(parsed.reason ?? "blocked by bot-connect") };
	}
	return block("bot-connect sent an unknown verdict");
}

/** Longest string argument passed on: a path is far shorter, file contents are longer. */
const MAX_ARG_CHARS = 4096;

/**
 * The tool arguments host-shim needs to judge a remote call's scope: short strings and lists
 * of short strings, where paths live. Contents (`write`'s `content`, `edit`'s texts) stay here:
 * host-shim reads only paths, and nothing else should cross the link.
 */
function pathArgs(input: unknown): Record<string, string | string[]> {
	const out: Record<string, string | string[]> = {};
	if (typeof input !== "object" || input === null) return out;
	for (const [key, value] of Object.entries(input as Record<string, unknown>)) {
		if (typeof value === "string" && value.length <= MAX_ARG_CHARS) {
			out[key] = value;
		} else if (Array.isArray(value)) {
			const short = value.filter((v): v is string => typeof v === "string" && v.length <= MAX_ARG_CHARS);
			if (short.length > 0) out[key] = short;
		}
	}
	return out;
}

function block(why: string): { block: true; reason: string } {
	return { block: true, reason: `${why}; the tool was blocked. Run it locally if it is needed.` };
}

function describe(error: unknown): string {
	return error instanceof Error ? error.message : String(error);
}

// ---------------------------------------------------------------------------------------
// The live session: link to `host-shim attach`

type Level = "info" | "warning" | "error";

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
	const pendingCommands = new Map<string, Pending<{ level: Level; text: string }>>();

	// Remote-turn tracking. A run (agent_start … agent_end) is remote when a prompt this
	// extension injected started it, or when such a prompt was delivered into it
	// (steer / follow-up). From then until agent_end every tool call is checked.
	const injected: string[] = []; // injected prompts whose `input` has not fired yet
	let nextRunRemote = false;
	let runOpen = false;
	let runRemote = false;
	let userMessagesInRun = 0;
	let queuedRemote: string[] = []; // remote prompts queued while pi worked
	let queuedLocal: string[] = []; // local prompts queued while pi worked
	const bashCommands = new Map<string, string>();

	const notify = (text: string, lvl: Level = "info") => {
		try {
			ctx?.ui.notify(`[bot-connect] ${text}`, lvl);
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
			p.resolve(runRemote ? block(why) : undefined);
			pendingVerdicts.delete(id);
		}
		for (const [id, p] of pendingCommands) {
			clearTimeout(p.timer);
			p.resolve({ level: "error", text: `bot-connect: ${why}.` });
			pendingCommands.delete(id);
		}
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
				pending.resolve(
					message.verdict === "allow"
						? undefined
						: { block: true, reason: String(message.reason ?? "blocked by bot-connect") },
				);
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
			yes = (await ctx?.ui.confirm(String(message.title ?? ""), String(message.message ?? ""), { timeout })) === true;
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
		s.on("error", (error) => {
			if (socket === s) linkDown(`the link to host-shim failed (${describe(error)})`, true);
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
			const program = process.env.PI_BOT_CONNECT_HOST_SHIM || "host-shim";
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

	// ------------------------------------------------------------- pi events -> host

	pi.on("session_start", async (_event, c) => {
		ctx = c;
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
			nextRunRemote = remote;
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
		runOpen = true;
		runRemote = nextRunRemote;
		nextRunRemote = false;
		userMessagesInRun = 0;
		send({ type: "turn_started", origin: runRemote ? "remote" : "local" });
	});

	pi.on("message_start", async (event) => {
		const message: any = event.message;
		if (message?.role !== "user" || !runOpen) return;
		userMessagesInRun += 1;
		if (userMessagesInRun === 1) return; // the prompt that started the run
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
			remote = queuedRemote.length > 0;
			if (remote) queuedRemote.shift();
		}
		if (remote && !runRemote) {
			// The rest of the run answers a messenger: its own turn, with the policy.
			runRemote = true;
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

	pi.on("message_end", async (event) => {
		const message: any = event.message;
		if (message?.role !== "assistant") return;
		const text = visibleText(message.content);
		if (text.trim()) {
			send({ type: "assistant_message", text });
		} else if (message.stopReason === "error") {
			send({ type: "assistant_message", text: `The model call failed: ${message.errorMessage ?? "no reason given"}` });
		}
	});

	pi.on("agent_end", async () => {
		runOpen = false;
		runRemote = false;
		queuedRemote = [];
		queuedLocal = [];
		bashCommands.clear();
		send({ type: "turn_settled" });
	});

	pi.on("tool_call", async (event) => {
		// Local turns are never restricted (the policy is for messenger-started turns),
		// so local work never waits for the bridge.
		if (!runRemote) return undefined;
		if (!linked) {
			return block("bot-connect is not running, so this messenger-started turn cannot be checked");
		}
		const id = `t${nextId++}`;
		return new Promise<{ block: true; reason: string } | undefined>((resolve) => {
			const timer = setTimeout(() => {
				pendingVerdicts.delete(id);
				resolve(block(`bot-connect gave no verdict within ${VERDICT_TIMEOUT_MS / 1000} s`));
			}, VERDICT_TIMEOUT_MS);
			pendingVerdicts.set(id, { resolve, timer });
			if (!send({ type: "tool_call", id, name: event.toolName, input: pathArgs(event.input) })) {
				clearTimeout(timer);
				pendingVerdicts.delete(id);
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
			c.ui.notify(answer.text, answer.level);
		},
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

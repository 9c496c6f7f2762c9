// Resumption of a long call's event stream through the official MCP TypeScript SDK's
// `StreamableHTTPClientTransport`, as the Streamable HTTP transport describes it: a client starts a
// `wait_for_event` in a session, keeps the stream's resumption token (`onresumptiontoken`, the
// event id the server sent), drops the connection while the call is under way, and later opens a
// new transport on the same session and resumes the call's stream with `resumptionToken` (a GET with
// `Last-Event-ID`), receiving the answer the server produced meanwhile.
//
// Usage: node resume.mjs URL TRACK > report.json
//
// After the resumption, a second client (its own session) posts the event the wait is for, so the
// answer can only arrive through the resumed stream. (rmcp 3.11 keeps a call's stream for a
// resumption while the call is under way; once the answer is sent the stream is gone, so an answer
// made while nobody listens is lost with it: docs/MCP.md, "Resumption".) Reports {token,
// session_id, dropped, token_after, result: {is_error, structured, text}} or {error}. The Rust test
// decides what is right.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, track] = process.argv.slice(2);
const WAIT = {
  method: "tools/call",
  params: {
    name: "wait_for_event",
    arguments: { track, event_pattern: "TASK_COMPLETE_resumed*", timeout: 60, fresh: true },
  },
};
const REQUEST = { timeout: 120_000 };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function connect(sessionId) {
  const transport = new StreamableHTTPClientTransport(new URL(url), sessionId ? { sessionId } : {});
  const client = new Client({ name: "pantheon-resume-test", version: "1.0.0" });
  // With a session id already set, the SDK reconnects to that session without a new handshake.
  await client.connect(transport);
  return { client, transport };
}

async function main() {
  const report = {};
  const first = await connect();
  report.session_id = first.transport.sessionId ?? null;
  let token = null;
  const pending = first.client
    .request(WAIT, CallToolResultSchema, { ...REQUEST, onresumptiontoken: (t) => (token = t) })
    .then(
      (r) => ({ answered_before_drop: r }),
      (e) => ({ dropped_with: String(e?.message ?? e) }),
    );
  // The server's priming event gives the token before any answer.
  for (let i = 0; i < 100 && token === null; i++) await sleep(50);
  report.token = token;
  if (token === null) {
    report.error = "no resumption token arrived on the call's stream";
    return report;
  }
  // Drop the connection while the call is under way.
  await first.transport.close();
  report.dropped = await pending;

  // Resume the call's stream on the same session from the last event id received (a GET with
  // Last-Event-ID: the SDK sends no new request), while the call is still under way.
  const again = await connect(report.session_id);
  const resumed = again.client.request(WAIT, CallToolResultSchema, {
    ...REQUEST,
    resumptionToken: token,
    onresumptiontoken: (t) => (report.token_after = t),
  });
  await sleep(1000);

  // Only now does another agent post the event the wait is for: the answer is made after the
  // resumption, and can reach the client only through the resumed stream.
  const other = await connect();
  await other.client.callTool(
    { name: "post_message", arguments: { track, msg_type: "TASK_COMPLETE", source: "w2", payload: { task_id: "resumed-1" } } },
    undefined,
    REQUEST,
  );
  await other.client.close();
  const result = await resumed;
  report.result = {
    is_error: Boolean(result.isError),
    structured: result.structuredContent ?? null,
    text: (result.content ?? []).filter((b) => b.type === "text").map((b) => b.text).join("\n"),
  };
  await again.transport.close();
  return report;
}

main().then(
  (report) => {
    process.stdout.write(JSON.stringify(report));
    process.exit(0);
  },
  (e) => {
    process.stdout.write(JSON.stringify({ error: String(e?.stack ?? e) }));
    process.exit(0);
  },
);

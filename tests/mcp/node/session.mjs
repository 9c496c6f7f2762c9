// Drives one `pantheon mcp` server through the official MCP TypeScript SDK
// (`@modelcontextprotocol/sdk`, pinned in package-lock.json beside this file), as a TypeScript host
// would.
//
// Usage: node session.mjs PANTHEON_BINARY ROOT < steps.json > results.json
//        node session.mjs URL - < steps.json > results.json
//
// With a URL (`http://…/mcp`) in place of the binary, the session connects to a running server with
// the SDK's `StreamableHTTPClientTransport`; `PANTHEON_MCP_TOKEN`, when set, is sent as
// `Authorization: Bearer TOKEN` (Node's `NODE_EXTRA_CA_CERTS` trusts a test's certificate). A
// connection the server refuses (e.g. HTTP 401) is reported as `{"connect_error": {"status",
// "message"}}` instead of the usual report.
//
// The steps and the report are those of ../python/session.py (`list_tools`, `call`, `gather`), so
// the Rust tests run one sequence through both official clients. A `call` is made with
// `Client.callTool`, which checks any structured content (of an error result too) against the
// tool's `outputSchema` with the SDK's own validator (Ajv). When that check fails, the SDK throws
// instead of returning the result, so the agent never sees the answer: the step then reports
// `{"is_error": ..., "structured": null, "text": "", "schema_errors": ["SDK: ..."]}`.
//
// The Rust tests decide what is right; this script only speaks the protocol and reports
// faithfully. It exits non-zero only when the session itself breaks (the server dies).

import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

const REFUSAL_META = "pantheon/refusal";
const REQUEST = { timeout: 120_000 };

// The SDK's messages for results that break the declared outputSchema (Client.callTool).
const SCHEMA_FAILURES = [
  "Structured content does not match the tool's output schema",
  "Failed to validate structured content",
  "has an output schema but did not return structured content",
];

function toolJson(tool) {
  return {
    name: tool.name,
    description: tool.description ?? null,
    input_schema: tool.inputSchema ?? null,
    output_schema: tool.outputSchema ?? null,
    annotations: tool.annotations ?? null,
  };
}

async function call(client, step) {
  let result;
  try {
    result = await client.callTool({ name: step.tool, arguments: step.arguments ?? {} }, undefined, REQUEST);
  } catch (e) {
    if (e instanceof McpError && SCHEMA_FAILURES.some((m) => e.message.includes(m))) {
      return { is_error: null, structured: null, text: "", refusal: null, schema_errors: [`SDK: ${e.message}`] };
    }
    if (e instanceof McpError) {
      return { protocol_error: { code: e.code, message: e.message } };
    }
    throw e;
  }
  const text = (result.content ?? [])
    .filter((b) => b.type === "text")
    .map((b) => b.text)
    .join("\n");
  return {
    is_error: Boolean(result.isError),
    structured: result.structuredContent ?? null,
    text,
    refusal: result._meta?.[REFUSAL_META] ?? null,
    // The SDK has checked the structured content (it throws otherwise, see above).
    schema_errors: [],
  };
}

async function gather(client, calls) {
  const order = [];
  const results = await Promise.all(
    calls.map(async (step, i) => {
      const r = await call(client, step);
      order.push(i);
      return r;
    }),
  );
  return { results, finished_order: order };
}

async function runStep(client, step) {
  switch (step.op) {
    case "list_tools":
      return { tools: (await client.listTools(undefined, REQUEST)).tools.map(toolJson) };
    case "call":
      return call(client, step);
    case "gather":
      return gather(client, step.calls);
    default:
      throw new Error(`unknown step op ${JSON.stringify(step.op)}`);
  }
}

async function main() {
  const [binary, root] = process.argv.slice(2);
  const steps = JSON.parse(readFileSync(0, "utf8"));
  const http = /^https?:\/\//.test(binary);
  let transport;
  if (http) {
    const token = process.env.PANTHEON_MCP_TOKEN;
    const headers = token ? { Authorization: `Bearer ${token}` } : {};
    transport = new StreamableHTTPClientTransport(new URL(binary), { requestInit: { headers } });
  } else {
    transport = new StdioClientTransport({
      command: binary,
      args: ["--root", root, "mcp"],
      env: { ...getDefaultEnvironment(), PANTHEON_LOG: process.env.PANTHEON_LOG ?? "warn" },
      stderr: "inherit",
    });
  }
  const client = new Client({ name: process.env.PANTHEON_MCP_CLIENT ?? "pantheon-tests-ts", version: "1.0.0" });
  try {
    await client.connect(transport, REQUEST);
  } catch (e) {
    if (!http) throw e;
    const status = e?.code ?? null;
    process.stdout.write(JSON.stringify({ connect_error: { status: Number.isInteger(status) ? status : null, message: String(e).slice(0, 2000) } }));
    return;
  }
  const info = client.getServerVersion();
  const server = {
    name: info?.name ?? null,
    version: info?.version ?? null,
    protocol_version: transport.protocolVersion ?? null,
    instructions: client.getInstructions() ?? null,
    tools_capability: client.getServerCapabilities()?.tools !== undefined,
  };
  // Listing the tools is what makes the SDK compile and cache each outputSchema validator; an
  // outputSchema the SDK's validator cannot compile fails here.
  await client.listTools(undefined, REQUEST);
  const results = [];
  for (const step of steps) {
    results.push(await runStep(client, step));
  }
  await client.close();
  process.stdout.write(JSON.stringify({ server, results }));
}

main().catch((e) => {
  console.error(e?.stack ?? String(e));
  process.exit(1);
});

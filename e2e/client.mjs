// A TypeScript-SDK MCP client for Portcullis's end-to-end tests.
//
//   node client.mjs '<json steps>' -- <server command> [args...]
//   node client.mjs '<json steps>' -- http://127.0.0.1:PORT/mcp
//
// Steps are [{"list": true}], [{"waitTool": "name"}] (list until the tool
// appears) or [{"call": "tool", "args": {...}}]; each step's result is
// printed as one JSON line on stdout. A call step with
// "retry": N is repeated (up to N times, a quarter second apart) while its
// result is an error. A URL connects over Streamable HTTP with the bearer
// token in $PORTCULLIS_E2E_TOKEN.
//
// The client offers, when asked by the environment:
//   PORTCULLIS_E2E_ROOTS      a JSON list of root URIs (roots capability)
//   PORTCULLIS_E2E_SAMPLING=1 sampling: answers with a fixed text and
//                             prints {"sampled": <request params>}
//   PORTCULLIS_E2E_ELICIT=1   elicitation: declines and prints
//                             {"elicited": <request params>}
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

const sep = process.argv.indexOf("--");
if (sep < 3 || sep === process.argv.length - 1) {
  console.error("usage: node client.mjs '<json steps>' -- <server command> [args...] | <url>");
  process.exit(2);
}
const steps = JSON.parse(process.argv[2]);
const [command, ...args] = process.argv.slice(sep + 1);

let transport;
if (/^https?:\/\//.test(command)) {
  transport = new StreamableHTTPClientTransport(new URL(command), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.PORTCULLIS_E2E_TOKEN ?? ""}` } },
  });
} else {
  transport = new StdioClientTransport({ command, args, stderr: "inherit", env: process.env });
}

const capabilities = {};
const roots = process.env.PORTCULLIS_E2E_ROOTS ? JSON.parse(process.env.PORTCULLIS_E2E_ROOTS) : null;
if (roots) capabilities.roots = { listChanged: true };
if (process.env.PORTCULLIS_E2E_SAMPLING === "1") capabilities.sampling = {};
if (process.env.PORTCULLIS_E2E_ELICIT === "1") capabilities.elicitation = { form: {} };

const client = new Client({ name: "portcullis-e2e-ts", version: "1.0.0" }, { capabilities });
if (roots) {
  client.setRequestHandler(ListRootsRequestSchema, async () => ({
    roots: roots.map((uri) => ({ uri, name: uri })),
  }));
}
if (capabilities.sampling) {
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    console.log(JSON.stringify({ sampled: req.params }));
    return { role: "assistant", content: { type: "text", text: "a fake model's reply" }, model: "fake-model" };
  });
}
if (capabilities.elicitation) {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    console.log(JSON.stringify({ elicited: req.params }));
    return { action: "decline" };
  });
}

await client.connect(transport);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
for (const step of steps) {
  try {
    if (step.list) {
      const r = await client.listTools();
      console.log(JSON.stringify({ tools: r.tools.map((t) => t.name) }));
    } else if (step.waitTool) {
      // Lists the tools until one of this name appears (30 s at most).
      let names = [];
      for (let i = 0; i < 120 && !names.includes(step.waitTool); i++) {
        if (i > 0) await sleep(250);
        names = (await client.listTools()).tools.map((t) => t.name);
      }
      console.log(JSON.stringify({ tools: names }));
    } else {
      let r;
      for (let i = 0; ; i++) {
        r = await client.callTool({ name: step.call, arguments: step.args ?? {} }, undefined, { timeout: 120000 });
        if (!r.isError || i + 1 >= (step.retry ?? 1)) break;
        await sleep(250);
      }
      console.log(JSON.stringify(r));
    }
  } catch (e) {
    console.log(JSON.stringify({ error: String(e && e.message ? e.message : e) }));
  }
}
await client.close();

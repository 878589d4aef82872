// A TypeScript-SDK MCP client for Portcullis's end-to-end tests.
//
//   node client.mjs '<json steps>' -- <server command> [args...]
//
// Steps are [{"list": true}] or [{"call": "tool", "args": {...}}]; each
// step's result is printed as one JSON line on stdout.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const sep = process.argv.indexOf("--");
if (sep < 3 || sep === process.argv.length - 1) {
  console.error("usage: node client.mjs '<json steps>' -- <server command> [args...]");
  process.exit(2);
}
const steps = JSON.parse(process.argv[2]);
const [command, ...args] = process.argv.slice(sep + 1);

const transport = new StdioClientTransport({ command, args, stderr: "inherit", env: process.env });
const client = new Client({ name: "portcullis-e2e-ts", version: "1.0.0" });
await client.connect(transport);
for (const step of steps) {
  try {
    if (step.list) {
      const r = await client.listTools();
      console.log(JSON.stringify({ tools: r.tools.map((t) => t.name) }));
    } else {
      const r = await client.callTool({ name: step.call, arguments: step.args ?? {} }, undefined, { timeout: 120000 });
      console.log(JSON.stringify(r));
    }
  } catch (e) {
    console.log(JSON.stringify({ error: String(e && e.message ? e.message : e) }));
  }
}
await client.close();

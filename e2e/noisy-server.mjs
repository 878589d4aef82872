// A TypeScript-SDK MCP server over stdio that, like many real servers,
// prints log lines to stdout (the protocol's stream) as well as answering,
// for Portcullis's framing tests.
//
//   node noisy-server.mjs
//
// Tools (all read-only):
//   echo  {text}         answers the text
//   noisy {text}         prints log lines on stdout (plain text and a
//                        JSON log record), then answers the text
//   slow  {text, ms}     answers the text after ms milliseconds
//   big   {bytes}        answers a text of that many bytes
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const server = new Server({ name: "noisy", version: "1.0.0" }, { capabilities: { tools: {} } });

const tool = (name, properties) => ({
  name,
  description: `the ${name} tool`,
  inputSchema: { type: "object", properties },
  annotations: { readOnlyHint: true },
});

server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [
    tool("echo", { text: { type: "string" } }),
    tool("noisy", { text: { type: "string" } }),
    tool("slow", { text: { type: "string" }, ms: { type: "number" } }),
    tool("big", { bytes: { type: "number" } }),
  ],
}));

server.setRequestHandler(CallToolRequestSchema, async (req) => {
  const args = req.params.arguments ?? {};
  const text = (t) => ({ content: [{ type: "text", text: t }] });
  switch (req.params.name) {
    case "echo":
      return text(String(args.text));
    case "noisy":
      console.log(`[noisy] handling a call with ${JSON.stringify(args)}`);
      console.log(JSON.stringify({ level: "info", msg: "structured log on the wrong stream" }));
      console.log("");
      console.log("Error: something a library printed");
      return text(String(args.text));
    case "slow":
      await new Promise((r) => setTimeout(r, Number(args.ms)));
      return text(String(args.text));
    case "big":
      return text("x".repeat(Number(args.bytes)));
  }
  throw new Error(`unknown tool ${req.params.name}`);
});

console.log("noisy server starting (this line goes to stdout, by mistake)");
await server.connect(new StdioServerTransport());

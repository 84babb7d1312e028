// An agent loop on the official MCP TypeScript SDK client (@modelcontextprotocol/sdk from npm),
// run by integration/mcpserve_ts_test.go against `airlock mcp serve`. It lists the tools, then
// calls an automatic tool, a confirmed one (the Go test approves it) and another confirmed one
// (the Go test denies it), and prints one JSON line per step on stdout:
//   {"step": "...", "tools"|"result"|"progress": ...}
// Environment: AIRLOCK_MCP_URL, AIRLOCK_MCP_TOKEN, FETCH_URL.
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { CallToolResultSchema } = require('@modelcontextprotocol/sdk/types.js');

const say = (o) => process.stdout.write(JSON.stringify(o) + '\n');

async function main() {
  const transport = new StreamableHTTPClientTransport(new URL(process.env.AIRLOCK_MCP_URL), {
    requestInit: { headers: { Authorization: 'Bearer ' + process.env.AIRLOCK_MCP_TOKEN } },
  });
  const client = new Client({ name: 'ts-agent', version: '1.0.0' });
  await client.connect(transport);
  const { tools } = await client.listTools();
  say({ step: 'tools', tools: tools.map((t) => t.name) });

  const health = await client.callTool({ name: 'system_health', arguments: {} });
  say({ step: 'automatic', result: health });

  for (const key of ['ts-approve', 'ts-deny']) {
    const progress = [];
    const res = await client.callTool(
      { name: 'web_fetch', arguments: { url: process.env.FETCH_URL }, _meta: { 'airlock/idempotency-key': key } },
      CallToolResultSchema,
      { onprogress: (p) => progress.push(p.message), timeout: 120000, resetTimeoutOnProgress: true },
    );
    say({ step: key, result: res, progress });
  }
  await client.close();
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + '\n');
  process.exit(1);
});

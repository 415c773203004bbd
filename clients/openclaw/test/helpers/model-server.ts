/**
 * A scripted OpenAI-compatible model on 127.0.0.1 for OpenClaw to talk to: it answers
 * `POST /v1/chat/completions` (streamed as server-sent events, or as one JSON body) with
 * whatever the test's script says (text, or tool calls), and records every request body
 * so a test can assert on exactly what the model was sent.
 */

import { once } from "node:events";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

export interface ChatRequest {
  model?: string;
  stream?: boolean;
  messages: { role: string; content?: unknown; tool_calls?: unknown[]; tool_call_id?: string }[];
  tools?: { type: string; function: { name: string } }[];
  [key: string]: unknown;
}

export type Reply =
  | { text: string }
  | { toolCalls: { name: string; arguments: Record<string, unknown> }[] };

export type Script = (request: ChatRequest) => Reply;

export interface ModelServer {
  /** "http://127.0.0.1:PORT/v1" */
  baseUrl: string;
  /** Every chat request received, oldest first. */
  requests: ChatRequest[];
  setScript(script: Script): void;
  close(): Promise<void>;
}

/** The text of a chat message's content (a string or a list of parts). */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part) => (part && typeof part === "object" && "text" in part ? String((part as { text: unknown }).text) : ""))
    .join("\n");
}

/** The last user message of a request. */
export function lastUserText(request: ChatRequest): string {
  for (let i = request.messages.length - 1; i >= 0; i--) {
    const message = request.messages[i]!;
    if (message.role === "user") return contentText(message.content);
  }
  return "";
}

export async function startModelServer(initial: Script = () => ({ text: "OK" })): Promise<ModelServer> {
  const requests: ChatRequest[] = [];
  let script = initial;
  let calls = 0;

  const server = createServer((req, res) => {
    void handle(req, res).catch((error: unknown) => {
      res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: String(error) } }));
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? "";
    if (req.method === "GET" && url.endsWith("/models")) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ id: "scripted-1", object: "model", owned_by: "test" }] }));
      return;
    }
    if (req.method !== "POST" || !url.endsWith("/chat/completions")) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: `no route ${req.method} ${url}` } }));
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const request = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ChatRequest;
    requests.push(request);
    const reply = script(request);
    const id = `chatcmpl-${++calls}`;
    const created = Math.floor(Date.now() / 1000);
    const model = request.model ?? "scripted-1";
    const toolCalls =
      "toolCalls" in reply
        ? reply.toolCalls.map((call, index) => ({
            index,
            id: `call_${calls}_${index}`,
            type: "function",
            function: { name: call.name, arguments: JSON.stringify(call.arguments) },
          }))
        : undefined;
    const finish = toolCalls ? "tool_calls" : "stop";
    const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };

    if (!request.stream) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id,
          object: "chat.completion",
          created,
          model,
          choices: [
            {
              index: 0,
              message: toolCalls
                ? { role: "assistant", content: null, tool_calls: toolCalls.map(({ index: _, ...c }) => c) }
                : { role: "assistant", content: (reply as { text: string }).text },
              finish_reason: finish,
            },
          ],
          usage,
        }),
      );
      return;
    }

    res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      connection: "keep-alive",
    });
    const send = (delta: Record<string, unknown>, finishReason: string | null, extra: Record<string, unknown> = {}) =>
      res.write(
        `data: ${JSON.stringify({
          id,
          object: "chat.completion.chunk",
          created,
          model,
          choices: [{ index: 0, delta, finish_reason: finishReason }],
          ...extra,
        })}\n\n`,
      );
    send({ role: "assistant", content: "" }, null);
    if (toolCalls) send({ tool_calls: toolCalls }, null);
    else send({ content: (reply as { text: string }).text }, null);
    send({}, finish, { usage });
    res.write("data: [DONE]\n\n");
    res.end();
  }

  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    setScript(next) {
      script = next;
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, "close").catch(() => undefined);
    },
  };
}

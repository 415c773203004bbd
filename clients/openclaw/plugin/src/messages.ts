/**
 * From OpenClaw's agent messages to memoryd's ChatMessage list.
 *
 * `agent_end` hands the plugin the session's messages after the run (the whole model
 * context, not only this turn's). A turn starts at its last user message (or the run of
 * user messages that ends there); from there to the end is what Capture is given, as
 * {role, text} pairs. Message content is a string or a list of parts; only text parts
 * are kept.
 */

export interface ChatLine {
  role: string;
  text: string;
}

/** memoryd refuses a turn of more than 1000 messages. */
export const MAX_TURN_MESSAGES = 1000;

/** The messages of the turn that just ended, oldest first. */
export function turnMessages(messages: readonly unknown[]): ChatLine[] {
  const lines: ChatLine[] = [];
  for (const message of messages) {
    const line = chatLine(message);
    if (line) lines.push(line);
  }
  let start = -1;
  for (let i = lines.length - 1; i >= 0; i--) {
    if (lines[i]!.role === "user") {
      start = i;
      break;
    }
  }
  if (start < 0) return [];
  // A turn may open with several user messages in a row (queued or steered input).
  while (start > 0 && lines[start - 1]!.role === "user") start--;
  return lines.slice(start).slice(0, MAX_TURN_MESSAGES);
}

function chatLine(message: unknown): ChatLine | undefined {
  if (!message || typeof message !== "object") return undefined;
  const record = message as Record<string, unknown>;
  const role = roleOf(record.role);
  if (!role) return undefined;
  const text = textOf(record.content);
  return text ? { role, text } : undefined;
}

function roleOf(role: unknown): string | undefined {
  if (typeof role !== "string" || role === "") return undefined;
  switch (role) {
    case "user":
    case "assistant":
    case "system":
      return role;
    case "toolResult":
    case "tool":
      return "tool";
    default:
      return role;
  }
}

/** The text of a message's content: a string, or the text parts of a part list. */
export function textOf(content: unknown): string {
  if (typeof content === "string") return content.trim();
  if (!Array.isArray(content)) return "";
  const parts: string[] = [];
  for (const part of content) {
    if (typeof part === "string") parts.push(part);
    else if (part && typeof part === "object") {
      const p = part as Record<string, unknown>;
      if ((p.type === "text" || p.type === undefined) && typeof p.text === "string") parts.push(p.text);
    }
  }
  return parts.join("\n").trim();
}

// Portcullis for opencode: every tool call is decided by Portcullis before
// it runs. Written by `portcullis hook install opencode`, checked by
// `portcullis doctor`; installing again rewrites it, so do not edit it.
//
// The call runs only when the hook exits 0 with {"decision": "allow"}.
// Anything else — a deny, another exit status, an answer that is not
// JSON, a binary that does not start, a hook that does not answer in
// time — throws, and opencode gives the model the reason instead.
import { spawn } from "node:child_process"

const COMMAND = /*PORTCULLIS-COMMAND*/ [];
const TIMEOUT_MS = /*PORTCULLIS-TIMEOUT*/ 0;

function decide(event) {
  return new Promise((resolve) => {
    let settled = false
    const done = (answer) => {
      if (!settled) {
        settled = true
        resolve(answer)
      }
    }
    const refuse = (why) => done({ decision: "deny", reason: "Portcullis denied this call: " + why })
    let child
    try {
      child = spawn(COMMAND[0], COMMAND.slice(1), { stdio: ["pipe", "pipe", "pipe"] })
    } catch (err) {
      refuse("the hook " + COMMAND[0] + " did not start: " + err.message)
      return
    }
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      refuse("the hook did not answer within " + TIMEOUT_MS / 1000 + " seconds")
    }, TIMEOUT_MS)
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.on("error", (err) => {
      clearTimeout(timer)
      refuse("the hook " + COMMAND[0] + " did not run: " + err.message)
    })
    child.on("close", (code) => {
      clearTimeout(timer)
      let answer
      try {
        answer = JSON.parse(stdout)
      } catch {
        answer = null
      }
      if (code === 0 && answer && answer.decision === "allow") {
        done({ decision: "allow" })
      } else if (answer && typeof answer.reason === "string" && answer.reason !== "") {
        done({ decision: "deny", reason: answer.reason })
      } else {
        const last = stderr.trim().split("\n").pop()
        refuse("the hook failed (exit status " + code + ")" + (last ? ": " + last : ""))
      }
    })
    child.stdin.on("error", () => {}) // a hook that exits early is judged by its exit
    child.stdin.end(JSON.stringify(event))
  })
}

export const Portcullis = async ({ directory }) => ({
  "tool.execute.before": async (input, output) => {
    const answer = await decide({
      hook_event_name: "tool.execute.before",
      session_id: input?.sessionID ?? "",
      tool_use_id: input?.callID ?? "",
      tool_name: input?.tool ?? "",
      tool_input: output?.args ?? null,
      cwd: directory ?? "",
    })
    if (answer.decision !== "allow") {
      throw new Error(answer.reason)
    }
  },
})

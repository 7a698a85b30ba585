//! The tools crucible's own agent offers its model.

use serde_json::json;

use crate::openai::Tool;

/// The tools offered to the model.
pub fn tools() -> Vec<Tool> {
    let path = json!({"type": "string", "description": "relative to the working folder"});
    vec![
        Tool::function(
            "read_file",
            "Read a text file.",
            json!({"type": "object", "properties": {"path": path}, "required": ["path"]}),
        ),
        Tool::function(
            "write_file",
            "Write a text file (created, or replaced), making its folders.",
            json!({"type": "object", "properties": {"path": path, "content": {"type": "string"}},
                   "required": ["path", "content"]}),
        ),
        Tool::function(
            "list_dir",
            "List a folder; folders end in '/'.",
            json!({"type": "object", "properties": {"path": path}}),
        ),
        Tool::function(
            "run_command",
            "Run a shell command in the working folder; returns its output.",
            json!({"type": "object", "properties": {"command": {"type": "string"}},
                   "required": ["command"]}),
        ),
        Tool::function(
            "notify",
            "Tell the human something; does not wait.",
            json!({"type": "object", "properties": {"title": {"type": "string"},
                   "body": {"type": "string"}}, "required": ["title"]}),
        ),
        Tool::function(
            "request_decision",
            "Ask the human to decide; waits for the answer.",
            json!({"type": "object", "properties": {"question": {"type": "string"},
                   "options": {"type": "array", "items": {"type": "string"}},
                   "details": {"type": "string"}}, "required": ["question"]}),
        ),
        Tool::function(
            "request_approval",
            "Ask the human to approve an action; waits for approve or deny.",
            json!({"type": "object", "properties": {"action": {"type": "string"},
                   "details": {"type": "string"}}, "required": ["action"]}),
        ),
    ]
}

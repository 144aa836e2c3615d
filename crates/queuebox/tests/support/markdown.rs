//! Fenced code blocks of the Markdown files under docs/, for the tests that run every example.

use std::path::{Path, PathBuf};

/// One fenced block: its info string (`yaml`, `sql`, …), its text, and where it starts.
#[derive(Debug, Clone)]
pub struct CodeBlock {
    pub file: PathBuf,
    pub line: usize,
    pub lang: String,
    pub text: String,
}

impl CodeBlock {
    pub fn first_line(&self) -> &str {
        self.text.lines().next().unwrap_or("").trim()
    }

    pub fn place(&self) -> String {
        format!("{}:{}", self.file.display(), self.line)
    }
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every Markdown file under docs/ and the README, sorted, so failures are reproducible.
pub fn doc_files() -> Vec<PathBuf> {
    let root = repo_root();
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    files.sort();
    files.push(root.join("README.md"));
    files
}

pub fn code_blocks(file: &Path) -> Vec<CodeBlock> {
    let text = std::fs::read_to_string(file).expect("doc file is readable");
    let mut blocks = Vec::new();
    let mut open: Option<(usize, String, String, String)> = None; // line, fence, lang, text
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match &mut open {
            None => {
                if let Some(rest) = trimmed.strip_prefix("```") {
                    let lang = rest.trim().to_owned();
                    open = Some((index + 1, "```".to_owned(), lang, String::new()));
                }
            }
            Some((start, fence, lang, body)) => {
                if trimmed.starts_with(fence.as_str()) && trimmed.trim() == fence {
                    blocks.push(CodeBlock {
                        file: file.to_owned(),
                        line: *start,
                        lang: std::mem::take(lang),
                        text: std::mem::take(body),
                    });
                    open = None;
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    assert!(open.is_none(), "{}: an unclosed code block", file.display());
    blocks
}

/// Splits SQL text into statements at `;`, outside quotes, comments and `$$` bodies.
pub fn split_sql(text: &str) -> Vec<String> {
    let mut statements = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut in_single = false;
    let mut in_dollar = false;
    while i < chars.len() {
        let c = chars[i];
        if !in_single && !in_dollar && c == '-' && chars.get(i + 1) == Some(&'-') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if !in_dollar && c == '\'' {
            in_single = !in_single;
        } else if !in_single && c == '$' && chars.get(i + 1) == Some(&'$') {
            in_dollar = !in_dollar;
            current.push_str("$$");
            i += 2;
            continue;
        } else if !in_single && !in_dollar && c == ';' {
            if !current.trim().is_empty() {
                statements.push(current.trim().to_owned());
            }
            current.clear();
            i += 1;
            continue;
        }
        current.push(c);
        i += 1;
    }
    if !current.trim().is_empty() {
        statements.push(current.trim().to_owned());
    }
    statements
}

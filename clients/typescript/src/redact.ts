// Error text and redaction (pull.md §11, PULL-63..69). A port of the server's
// crates/queuebox-core/src/redact: every implementation must give identical output, and the
// shared corpus (clients/contract/redaction-corpus.json) is the judge. Texts are handled as
// arrays of Unicode code points, so lengths and positions count code points (PULL-64).

export const INPUT_BOUND = 2512;
export const MAX_LENGTH = 2000;
export const TRUNCATION_MARKER = '...[truncated]';

const REDACTED = '[REDACTED]';
const MASKED_USERINFO = '***';
const MAX_ERROR_LEVELS = 5;
const CAUSE_SEPARATOR = ' | caused by ';
const SCHEME_WORDS = ['basic', 'bearer', 'digest', 'negotiate', 'token'];

type Text = string[];

/** Redacts secrets from an error text (PULL-65). Linear in the bounded input. */
export function redact(text: string): string {
  const bounded: Text = [];
  for (const c of text) {
    if (bounded.length === INPUT_BOUND) break;
    bounded.push(c);
  }
  return truncate(maskAuthSchemes(maskUserinfo(maskKeyValues(bounded))));
}

/**
 * The text of an error and its causes (PULL-63): `message` (or `String(value)` for a non-Error)
 * of at most 5 levels, following `cause`, joined by ` | caused by `. Stops at a cause already seen.
 */
export function errorText(error: unknown): string {
  const seen: unknown[] = [];
  const texts: string[] = [];
  let next: unknown = error;
  let hasNext = true;
  while (hasNext && texts.length < MAX_ERROR_LEVELS && !seen.includes(next)) {
    seen.push(next);
    texts.push(levelText(next));
    hasNext = false;
    if (next instanceof Error && 'cause' in next && next.cause !== undefined) {
      next = next.cause;
      hasNext = true;
    }
  }
  return texts.join(CAUSE_SEPARATOR);
}

/** `redact(errorText(error))`: the text that reaches `last_error` and the logs. */
export function redactedErrorText(error: unknown): string {
  return redact(errorText(error));
}

function levelText(value: unknown): string {
  if (value instanceof Error) return String(value.message);
  try {
    return String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

function truncate(text: Text): string {
  if (text.length <= MAX_LENGTH) return text.join('');
  const kept = MAX_LENGTH - [...TRUNCATION_MARKER].length;
  return text.slice(0, kept).join('') + TRUNCATION_MARKER;
}

// --- character classes (ASCII only, PULL-64) ---

function isAsciiAlpha(c: string | undefined): boolean {
  return c !== undefined && c.length === 1 && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
}
function isAsciiDigit(c: string | undefined): boolean {
  return c !== undefined && c.length === 1 && c >= '0' && c <= '9';
}
function isAsciiAlnum(c: string | undefined): boolean {
  return isAsciiAlpha(c) || isAsciiDigit(c);
}
function isWord(c: string | undefined): boolean {
  return isAsciiAlnum(c) || c === '_';
}
function isSpace(c: string | undefined): boolean {
  return c === ' ' || c === '\t' || c === '\r' || c === '\n' || c === '\x0B' || c === '\x0C';
}
function isBlank(c: string | undefined): boolean {
  return c === ' ' || c === '\t';
}
function asciiLower(c: string): string {
  return isAsciiAlpha(c) ? c.toLowerCase() : c;
}

/** `word` (lower-case ASCII) occurs at `at`, compared ASCII case-insensitively. */
function wordAt(text: Text, at: number, word: string): boolean {
  if (at < 0 || at + word.length > text.length) return false;
  for (let i = 0; i < word.length; i++) {
    if (asciiLower(text[at + i]!) !== word[i]) return false;
  }
  return true;
}

function schemeWordAt(text: Text, at: number): number | undefined {
  for (const word of SCHEME_WORDS) {
    if (wordAt(text, at, word)) return word.length;
  }
  return undefined;
}

function skipBlanks(text: Text, at: number): number {
  while (at < text.length && isBlank(text[at])) at++;
  return at;
}

// --- step 2: key/value pairs (PULL-66) ---

const KEYS: string[][] = [
  ['authorization'],
  ['api', 'key'],
  ['access', 'key'],
  ['secret', 'key'],
  ['private', 'key'],
  ['cookie'],
  ['token'],
  ['secret'],
  ['password'],
  ['passwd'],
  ['pwd'],
  ['passphrase'],
  ['credentials'],
  ['credential'],
];
const MAX_PREFIX = 64;

function maskKeyValues(text: Text): Text {
  const out: Text = [];
  let copied = 0;
  let resume = 0;
  let end = 1;
  while (end < text.length) {
    let found: [number, boolean] | undefined;
    if (isKeyEnd(text, end)) {
      const sep = separator(text, end);
      if (sep !== undefined && keyEndsAt(text, end, resume)) found = sep;
    }
    if (found === undefined) {
      end++;
      continue;
    }
    const [valueStart, colon] = found;
    const v = value(text, valueStart, colon);
    if (v !== undefined) {
      pushRange(out, text, copied, valueStart);
      out.push(...v[1]);
      copied = v[0];
      resume = v[0];
    } else {
      resume = valueStart;
    }
    end = resume + 1;
  }
  pushRange(out, text, copied, text.length);
  return out;
}

function pushRange(out: Text, text: Text, from: number, to: number): void {
  for (let i = from; i < to; i++) out.push(text[i]!);
}

function isKeyEnd(text: Text, end: number): boolean {
  return isAsciiAlpha(text[end - 1]) && !isWord(text[end]);
}

function separator(text: Text, at: number): [number, boolean] | undefined {
  let i = at;
  if (text[i] === '"' || text[i] === "'") i++;
  i = skipBlanks(text, i);
  const mark = text[i];
  if (mark !== ':' && mark !== '=') return undefined;
  while (text[i] === mark) i++;
  return [skipBlanks(text, i), mark === ':'];
}

function keyEndsAt(text: Text, end: number, resume: number): boolean {
  return KEYS.some((parts) =>
    keyStarts(text, end, parts).some((start) => start !== undefined && prefixAllows(text, start, resume)),
  );
}

function keyStarts(text: Text, end: number, parts: string[]): (number | undefined)[] {
  const last = parts[parts.length - 1]!;
  const lastStart = end - last.length;
  if (lastStart < 0 || !wordAt(text, lastStart, last)) return [];
  if (parts.length === 1) return [lastStart];
  const first = parts[0]!;
  const joinedStart = lastStart - first.length;
  const joined = joinedStart >= 0 && wordAt(text, joinedStart, first) ? joinedStart : undefined;
  let separated: number | undefined;
  const sepAt = lastStart - 1;
  if (sepAt >= 0 && (text[sepAt] === '-' || text[sepAt] === '_' || text[sepAt] === '.')) {
    const s = sepAt - first.length;
    if (s >= 0 && wordAt(text, s, first)) separated = s;
  }
  return [joined, separated];
}

function prefixAllows(text: Text, keyStart: number, resume: number): boolean {
  let run = 0;
  for (let i = keyStart - 1; i >= 0 && run <= MAX_PREFIX && isWord(text[i]); i--) run++;
  return run <= MAX_PREFIX && keyStart - run >= resume;
}

function value(text: Text, start: number, colon: boolean): [number, Text] | undefined {
  const first = text[start];
  if (first === undefined) return undefined;
  if (first === '"' || first === "'") {
    const close = closingQuote(text, start + 1, first);
    if (close !== undefined) return [close + 1, [first, ...REDACTED, first]];
    return [text.length, [first, ...REDACTED]];
  }
  if (first === '{' || first === '[') return undefined;
  let i = start;
  const len = schemeWordAt(text, start);
  if (len !== undefined) {
    const after = skipBlanks(text, start + len);
    if (after > start + len) i = after;
  }
  while (i < text.length && !endsValue(text[i]!, colon)) i++;
  return i > start ? [i, [...REDACTED]] : undefined;
}

function closingQuote(text: Text, from: number, quote: string): number | undefined {
  let i = from;
  while (i < text.length) {
    const c = text[i];
    if (c === quote) return i;
    i += c === '\\' ? 2 : 1;
  }
  return undefined;
}

function endsValue(c: string, colon: boolean): boolean {
  if (c === ',' || c === ';' || c === '}' || c === ']' || c === '&' || c === '"') return true;
  return colon ? c === '\r' || c === '\n' : isSpace(c);
}

// --- step 3: URL user information (PULL-67) ---

const MAX_SCHEME = 32;
const WINDOW = 200;

function maskUserinfo(text: Text): Text {
  const index = new UserinfoIndex(text);
  const out: Text = [];
  let copied = 0;
  let resume = 0;
  let colon = 0;
  while (colon + 1 < text.length) {
    if (text[colon] !== ':' || text[colon + 1] !== '/' || !schemeEndsAt(text, colon, resume)) {
      colon++;
      continue;
    }
    const slashes = text[colon + 2] === '/' ? 2 : 1;
    const rest = colon + 1 + slashes;
    const at = userinfoEnd(text, index, rest);
    if (at !== undefined) {
      pushRange(out, text, copied, rest);
      out.push(...MASKED_USERINFO);
      copied = at;
      resume = at + 1;
    } else {
      resume = rest;
    }
    colon = resume;
  }
  pushRange(out, text, copied, text.length);
  return out;
}

function schemeEndsAt(text: Text, colon: number, resume: number): boolean {
  const lowest = Math.max(resume, colon - MAX_SCHEME, 0);
  for (let i = colon - 1; i >= lowest; i--) {
    const c = text[i]!;
    if (!(isAsciiAlnum(c) || c === '+' || c === '.' || c === '-')) return false;
    if (isAsciiAlpha(c)) return true;
  }
  return false;
}

function userinfoEnd(text: Text, index: UserinfoIndex, rest: number): number | undefined {
  const lEnd = index.nextSpace[rest]!;
  const firstPath = index.nextPath[rest]!;
  const firstColon = index.nextColon[rest]!;
  const at = index.lastAt[lEnd];
  if (at !== undefined && at >= rest) {
    const userinfo =
      at > rest && (firstPath >= at || (firstColon < firstPath && !index.isPort(firstColon + 1, firstPath)));
    return userinfo ? at : undefined;
  }
  const hostAndPassword = firstColon < lEnd && firstPath >= lEnd && !index.isPort(firstColon + 1, lEnd);
  if (!hostAndPassword) return undefined;
  const windowEnd = Math.min(text.length, lEnd + WINDOW);
  const cut = windowCut(text, lEnd, windowEnd);
  for (let i = cut - 1; i >= lEnd; i--) {
    if (text[i] === '@' && i + 1 < cut && !isSpace(text[i + 1])) return i;
  }
  return undefined;
}

function windowCut(text: Text, start: number, end: number): number {
  for (let i = start; i < end; i++) {
    const c = text[i];
    if (c === '\r' || c === '\n' || c === '/' || c === '?' || c === '#') return i;
    if (c === ',' && i + 1 < end && text[i + 1] === ' ') return i;
  }
  return end;
}

class UserinfoIndex {
  readonly nextSpace: number[];
  readonly nextPath: number[];
  readonly nextColon: number[];
  readonly nextNonDigit: number[];
  readonly lastAt: (number | undefined)[];

  constructor(text: Text) {
    const next = (wanted: (c: string) => boolean): number[] => {
      const table = new Array<number>(text.length + 1).fill(text.length);
      for (let i = text.length - 1; i >= 0; i--) table[i] = wanted(text[i]!) ? i : table[i + 1]!;
      return table;
    };
    this.nextSpace = next(isSpace);
    this.nextPath = next((c) => c === '/' || c === '?' || c === '#');
    this.nextColon = next((c) => c === ':');
    this.nextNonDigit = next((c) => !isAsciiDigit(c));
    this.lastAt = new Array<number | undefined>(text.length + 1).fill(undefined);
    for (let i = 0; i < text.length; i++) this.lastAt[i + 1] = text[i] === '@' ? i : this.lastAt[i];
  }

  isPort(from: number, to: number): boolean {
    return from < to && this.nextNonDigit[from]! >= to;
  }
}

// --- step 4: bare authorization schemes (PULL-68) ---

const CREDENTIAL_LENGTH = 16;

function maskAuthSchemes(text: Text): Text {
  const out: Text = [];
  let copied = 0;
  let at = 0;
  while (at < text.length) {
    const found = credentialAfterScheme(text, at);
    if (found === undefined) {
      at++;
      continue;
    }
    const [start, end] = found;
    if (looksLikeCredential(text, start, end)) {
      pushRange(out, text, copied, start);
      out.push(...REDACTED);
      copied = end;
      at = end;
    } else {
      at = start;
    }
  }
  pushRange(out, text, copied, text.length);
  return out;
}

function credentialAfterScheme(text: Text, at: number): [number, number] | undefined {
  if (at > 0 && isWord(text[at - 1])) return undefined;
  const len = schemeWordAt(text, at);
  if (len === undefined) return undefined;
  const wordEnd = at + len;
  const start = skipBlanks(text, wordEnd);
  if (start === wordEnd) return undefined;
  let end = start;
  while (end < text.length && isTokenChar(text[end]!)) end++;
  if (end === start) return undefined;
  while (text[end] === '=') end++;
  return [start, end];
}

function isTokenChar(c: string): boolean {
  return isAsciiAlnum(c) || c === '.' || c === '_' || c === '~' || c === '+' || c === '/' || c === '-';
}

function looksLikeCredential(text: Text, start: number, end: number): boolean {
  if (end - start >= CREDENTIAL_LENGTH) return true;
  for (let i = start; i < end; i++) {
    if (isAsciiDigit(text[i]) || text[i] === '=') return true;
  }
  return false;
}

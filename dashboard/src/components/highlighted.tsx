import { Fragment } from 'react';

/**
 * What the api puts around each match in a search result, built from the
 * page's `highlight_token`: the reference implementation's markers
 * (docs/api.md, "List and search").
 */
export const highlightMarkers = (token: string) => ({ start: `__CV_HL_START_${token}__`, end: `__CV_HL_END_${token}__` });

/** The message cut into plain text and matches; a marker without its pair stays text. */
export function highlightParts(text: string, token: string | undefined): { text: string; match: boolean }[] {
  if (!token) return [{ text, match: false }];
  const { start, end } = highlightMarkers(token);
  const parts: { text: string; match: boolean }[] = [];
  let at = 0;
  for (let open = text.indexOf(start); open !== -1; open = text.indexOf(start, at)) {
    const close = text.indexOf(end, open + start.length);
    if (close === -1) break;
    if (open > at) parts.push({ text: text.slice(at, open), match: false });
    parts.push({ text: text.slice(open + start.length, close), match: true });
    at = close + end.length;
  }
  if (at < text.length || parts.length === 0) parts.push({ text: text.slice(at), match: false });
  return parts;
}

/** The message as stored: the markers taken out. */
export const withoutHighlights = (text: string, token: string | undefined) =>
  highlightParts(text, token)
    .map((p) => p.text)
    .join('');

/**
 * A search result message, its matches in `mark`. Everything is rendered as
 * text (never as HTML), whatever the log line contains.
 */
export function Highlighted({ text, token }: { text: string; token?: string | undefined }) {
  return (
    <>
      {highlightParts(text, token).map((part, i) => (part.match ? <mark key={i}>{part.text}</mark> : <Fragment key={i}>{part.text}</Fragment>))}
    </>
  );
}

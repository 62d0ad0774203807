import { Fragment } from 'react';

/**
 * A search result message: the api wrapped every match in `token`, so the
 * pieces alternate between plain text and matches. Everything is rendered
 * as text (never as HTML), whatever the log line contains.
 */
export function Highlighted({ text, token }: { text: string; token?: string | undefined }) {
  if (!token || !text.includes(token)) return <>{text}</>;
  return (
    <>
      {text.split(token).map((part, i) => (i % 2 === 1 ? <mark key={i}>{part}</mark> : <Fragment key={i}>{part}</Fragment>))}
    </>
  );
}

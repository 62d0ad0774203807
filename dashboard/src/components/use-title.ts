import { useEffect } from 'react';

/** The browser tab names the page (history and screen readers announce it too). */
export function useTitle(title: string): void {
  useEffect(() => {
    document.title = `${title} · orloj`;
  }, [title]);
}

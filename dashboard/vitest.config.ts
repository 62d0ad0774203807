import { defineConfig, mergeConfig } from 'vitest/config';
import viteConfig from './vite.config';

// The component tests (Vitest, jsdom) on top of the app's Vite settings.
export default mergeConfig(
  viteConfig,
  defineConfig({
    test: {
      environment: 'jsdom',
      include: ['src/**/*.test.tsx', 'src/**/*.test.ts'],
      setupFiles: ['src/test/setup.ts'],
      restoreMocks: true,
      // A focused test (.only) fails the run instead of hiding the rest (docs/testing.md, "A strict gate").
      allowOnly: false,
      // Bounds, not assertions: the tests wait on what the page shows (findBy…), and CI's machine is
      // busy (Vitest's 5 s ran out at a load of 19). Testing Library's waits get theirs in setup.ts.
      testTimeout: 60_000,
    },
  }),
);

import { cleanup } from '@testing-library/react';
import { afterEach } from 'vitest';
import { installFakeApi } from './fake-api';

installFakeApi();

afterEach(cleanup);

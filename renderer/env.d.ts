/// <reference types="svelte" />
/// <reference types="vite/client" />

import type {PonderApi} from "../preload/contract.js";

declare global {
    // eslint-disable-next-line @typescript-eslint/consistent-type-definitions -- only an interface merges into Window
    interface Window {
        /** The preload bridge; absent when the renderer runs in a plain browser (headless mode, tests). */
        ponder?: PonderApi;
    }
}

export {};

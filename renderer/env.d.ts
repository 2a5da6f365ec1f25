/// <reference types="svelte" />
/// <reference types="vite/client" />

import type {PonderApi} from "../preload/contract.js";

declare global {
    interface Window {
        /** The preload bridge; absent when the renderer runs in a plain browser (headless mode, tests). */
        ponder?: PonderApi;
    }
}

export {};

import {createContext} from "svelte";
import type {Ponder} from "./ponder.svelte.js";

/** The app's state, given by `App.svelte` to every component below it. */
export const [getPonder, setPonder] = createContext<Ponder>();

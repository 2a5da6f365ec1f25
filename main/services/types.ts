import type {EventChannel, Events} from "../../preload/contract.js";

/** Sends an event to every connected renderer. */
export type Emit = <C extends EventChannel>(channel: C, payload: Events[C]) => void;

export type Clock = () => number;

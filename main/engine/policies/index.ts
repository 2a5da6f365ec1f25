import {fullPolicy} from "./full.js";
import {h2oPolicy} from "./h2o.js";
import {lavaPolicy} from "./lava.js";
import {leanKvPolicy} from "./leankv.js";
import {lethePolicy} from "./lethe.js";
import {refreeKvPolicy} from "./refreekv.js";
import {streamingLlmPolicy} from "./streamingLlm.js";
import {trimKvPolicy} from "./trimkv.js";
import type {Policy, PolicyId} from "./types.js";

export const policies = {
    full: fullPolicy,
    streamingllm: streamingLlmPolicy,
    h2o: h2oPolicy,
    lethe: lethePolicy,
    refreekv: refreeKvPolicy,
    leankv: leanKvPolicy,
    trimkv: trimKvPolicy,
    lava: lavaPolicy
} as const satisfies {[Id in PolicyId]: Policy<never, unknown> | Policy<any, any>};

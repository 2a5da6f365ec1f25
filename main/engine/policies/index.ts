import type {PolicyId, PolicyParams, TunablePolicyId} from "../../../preload/policyCatalogue.js";
import {fullPolicy} from "./full.js";
import {h2oPolicy} from "./h2o.js";
import {lavaPolicy} from "./lava.js";
import {leanKvPolicy} from "./leankv.js";
import {lethePolicy} from "./lethe.js";
import {refreeKvPolicy} from "./refreekv.js";
import {streamingLlmPolicy} from "./streamingLlm.js";
import {trimKvPolicy} from "./trimkv.js";
import type {Policy} from "./types.js";

/** The engine's implementation of every policy in the catalogue (preload/policyCatalogue.ts), by its id. */
export const policies = {
    full: fullPolicy,
    streamingllm: streamingLlmPolicy,
    h2o: h2oPolicy,
    lethe: lethePolicy,
    refreekv: refreeKvPolicy,
    leankv: leanKvPolicy,
    trimkv: trimKvPolicy,
    lava: lavaPolicy
} as const satisfies {[Id in PolicyId]: Policy<any, any>};

/** The parameters the catalogue declares for a policy: none for one with nothing to tune. */
type CatalogueParams<Id extends PolicyId> = Id extends TunablePolicyId ? PolicyParams[Id] : Record<string, never>;
type ParamsOf<P> = P extends Policy<infer Params, any> ? Params : never;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
/** The policies whose module takes other parameters than the catalogue declares: none, or this file does not compile. */
type Mismatched = {[Id in PolicyId]: Same<ParamsOf<(typeof policies)[Id]>, CatalogueParams<Id>> extends true ? never : Id}[PolicyId];
const paramsMatchTheCatalogue: [Mismatched] extends [never] ? true : Mismatched = true;
void paramsMatchTheCatalogue;

// The harness's choices on snapshot files (choices.h, "snapshot files"), without llama.cpp: for each policy named, the
// file's rounds that hold what it reads, in order (its state carried from round to round, as in a run), and per round
// the positions `decide` frees. test/native/gpuChoices.test.ts compiles it and holds its output against what
// main/engine/policies/ chooses for the same rounds.
//
//   ponder-gpu-choose FILE POLICY...
//
// prints one line per round and policy: the round's index in the file, the policy, the freed positions (ascending,
// comma-separated), tab-separated. A policy reads scores (every one but streamingllm and trimkv), the retention gates
// (trimkv) and the value norms (lava): a round without them is skipped for it.
#include "choices.h"

#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

namespace {

bool holds_inputs(const std::string & policy, const ponder::snapshot & s) {
    if (policy == "streamingllm")
        return true;
    if (policy == "trimkv")
        return !s.log_beta.empty();
    const bool scores = s.heads > 0 && !s.accumulated.empty() && !s.last.empty();
    return policy == "lava" ? scores && !s.value_norms.empty() : scores;
}

} // namespace

int main(int argc, char ** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: ponder-gpu-choose FILE POLICY...\n");
        return 64;
    }
    try {
        std::ifstream in(argv[1]);
        if (!in)
            ponder::fail(std::string("cannot read ") + argv[1]);
        const std::vector<ponder::recorded_round> rounds = ponder::read_rounds(in);
        for (int a = 2; a < argc; a++) {
            const std::string policy = argv[a];
            ponder::policy_state state;
            for (size_t i = 0; i < rounds.size(); i++) {
                if (!holds_inputs(policy, rounds[i].s))
                    continue;
                const std::vector<int32_t> evict = ponder::decide(policy, rounds[i].s, rounds[i].target, state);
                std::printf("%zu\t%s\t", i, policy.c_str());
                for (size_t k = 0; k < evict.size(); k++)
                    std::printf(k == 0 ? "%d" : ",%d", (int) evict[k]);
                std::printf("\n");
            }
        }
        return 0;
    } catch (const std::exception & err) {
        std::fprintf(stderr, "ponder-gpu-choose: %s\n", err.what());
        return 1;
    }
}

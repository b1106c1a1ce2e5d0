#pragma once
// Where the prompt cache keeps snapshots of a recurrent model's state: their size in pool pages and the stride of
// positions at which a computing stream takes them.
#include <cstddef>

#include "engine/engine.h"
#include "models/memory_spec.h"

namespace fs {

// Floats one KV page of `spec` holds (K and V of its attending layers).
size_t page_floats_of(const SequenceMemorySpec& spec, int page_tokens);

// Pool pages one snapshot of the spec's recurrent state takes: ceil(state floats / page floats); 0 without state or
// without attending layers (the prompt cache then stays off).
int pages_per_state_snapshot(const SequenceMemorySpec& spec, int page_tokens);

// Positions between two snapshots a stream takes while it computes: options.prompt_cache_state_stride when set (a
// multiple of the page size), else as many pages as one snapshot takes, so snapshots cost about what the K/V pages
// between them cost; then a multiple of `alignment` too (Model::prompt_alignment). 0 without state.
int state_snapshot_stride(const EngineOptions& options, const SequenceMemorySpec& spec, int alignment = 1);

// Host snapshots in flight at most: with a prompt cache, those one round's rows can take, one more per stream, and
// the one a finishing stream hands over; with a drafter, one per drafted row of every stream's verify window.
size_t state_snapshots_in_flight(const EngineOptions& options, const SequenceMemorySpec& spec);

}  // namespace fs

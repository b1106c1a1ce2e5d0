#pragma once
// Large float buffers handed from one round to the next. A round's logits (rows × vocabulary, tens of MB) come from
// take_floats and go back with recycle_floats once read, so a server does not map, fault in and zero them anew
// every round. Thread-safe; a few buffers are kept, the largest first.
#include <cstddef>
#include <vector>

namespace fs {

// A vector of `n` floats whose contents are unspecified (a kept buffer's when one is large enough).
std::vector<float> take_floats(size_t n);
// Keeps `v`'s storage for a later take_floats when it is large enough to be worth keeping.
void recycle_floats(std::vector<float>&& v);

}  // namespace fs

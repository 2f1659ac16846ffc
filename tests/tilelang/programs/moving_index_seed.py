# Sums whose element moves as the loop runs: the index reads a tensor the loop itself updates, so each
# step adds into the element the step before chose. No accumulator can stand for one element here.
@tile_kernel
def counter_index(x: Tensor[INT32]):
    s = zeros((x.shape[0] + 1,), INT32)
    t = zeros((1,), INT32)
    for j in range(x.shape[0]):
        s[t[0]] += x[j]
        t[0] += 1
    return s


@tile_kernel
def self_index(x: Tensor[INT32]):
    s = zeros((x.shape[0] + 1,), INT32)
    for j in range(x.shape[0]):
        s[s[0]] += x[j]
    return s

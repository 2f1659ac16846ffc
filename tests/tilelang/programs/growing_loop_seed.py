# A running count whose inner loop runs as many times as the count so far: the loop's bound is read
# anew each time the loop starts, so the count cannot wait in an accumulator until the nest ends.
@tile_kernel
def doubling(n: Tensor[INT32]):
    s = zeros((1,), INT32)
    s[0] = n[0]
    for i in range(3):
        for j in range(s[0]):
            s[0] = s[0] + 1
    return s

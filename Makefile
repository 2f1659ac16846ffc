# The README's two commands. Each installs what it needs, configures, builds and runs by itself.
#   make demo   build and run the demo on the best device present
#   make test   build and run every test
BUILD ?= build
BUILD_TYPE ?= Release
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: demo test clean

demo:
	./scripts/setup demo
	cmake -S . -B $(BUILD) -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)
	cmake --build $(BUILD) -j $(JOBS) --target tl
	$(BUILD)/tools/tl/tl demo

test:
	./scripts/setup test
	cmake -S . -B $(BUILD) -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)
	cmake --build $(BUILD) -j $(JOBS)
	ctest --test-dir $(BUILD) --output-on-failure --no-tests=error -j $(JOBS)

clean:
	rm -rf $(BUILD)

// The owner of the test programs' precompiled headers (tests/CMakeLists.txt, AETHER_TEST_PCH).

import Glibc

// Entry point only: everything lives in the other files so that tests can `@testable import` it.
exit(CommandLineTool.main(CommandLine.arguments))

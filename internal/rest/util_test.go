package rest_test

import (
	"log/slog"
	"runtime"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func runtimeGosched() { runtime.Gosched() }

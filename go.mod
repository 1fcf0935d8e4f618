module github.com/pyrualean/pyrualean

go 1.26.8

require (
	github.com/go-zeromq/goczmq/v4 v4.2.2 // indirect
	github.com/go-zeromq/zmq4 v0.17.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/modelcontextprotocol/go-sdk v1.8.0 // indirect
	github.com/sashabaranov/go-openai v1.43.0 // indirect
	golang.org/x/sync v0.20.0 // indirect
	golang.org/x/text v0.15.0 // indirect
)

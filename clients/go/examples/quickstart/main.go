// quickstart: store, recall, update, forget, a Stream session and an error, against a
// running memoryd (MEMORYD_ADDRESS, default 127.0.0.1:50051; MEMORYD_AUTH_TOKEN if set).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"

	memoryd "github.com/memoryd/memoryd/clients/go"
	pb "github.com/memoryd/memoryd/clients/go/memorydv1"
	"google.golang.org/protobuf/proto"
)

func main() {
	c, err := memoryd.New(memoryd.Config{
		Address: os.Getenv("MEMORYD_ADDRESS"), // "" = 127.0.0.1:50051
		Token:   os.Getenv("MEMORYD_AUTH_TOKEN"),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	r, err := c.Store(ctx, &pb.StoreRequest{
		AgentId:        "main",
		Text:           "Deploys happen on Fridays at 5pm",
		Importance:     proto.Float32(0.9),
		Metadata:       map[string]string{"source": "chat"},
		IdempotencyKey: "msg-1842",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Outcome, r.Memory.Id)

	hits, err := c.Recall(ctx, &pb.RecallRequest{AgentId: "main", Query: "when do we deploy?", Limit: 3})
	if err != nil {
		log.Fatal(err)
	}
	for _, hit := range hits.Results {
		fmt.Printf("%.2f %s\n", hit.Score, hit.Memory.Text)
	}

	text := "Deploys happen on Thursdays at 5pm"
	if _, err := c.Update(ctx, &pb.UpdateRequest{AgentId: "main", Id: r.Memory.Id, Text: &text}); err != nil {
		log.Fatal(err)
	}

	// A Stream session: ops run concurrently, answers come back by request id.
	session, err := c.Stream(ctx)
	if err != nil {
		log.Fatal(err)
	}
	_ = session.Send(&pb.StreamRequest{RequestId: "1", Op: &pb.StreamRequest_Recall{
		Recall: &pb.RecallRequest{AgentId: "main", Query: "deploy day"}}})
	_ = session.Send(&pb.StreamRequest{RequestId: "2", Op: &pb.StreamRequest_Store{
		Store: &pb.StoreRequest{AgentId: "main", Text: ""}}}) // fails alone: INVALID_ARGUMENT
	_ = session.CloseSend()
	for {
		resp, err := session.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		if e := resp.GetError(); e != nil {
			fmt.Println(resp.RequestId, "failed:", e.CodeName, e.Message)
		} else {
			fmt.Println(resp.RequestId, "ok")
		}
	}

	if _, err := c.ForgetID(ctx, "main", r.Memory.Id); err != nil {
		log.Fatal(err)
	}

	_, err = c.Store(ctx, &pb.StoreRequest{AgentId: "main", Text: ""})
	var e *memoryd.Error
	if errors.As(err, &e) {
		fmt.Println(memoryd.CodeName(err), e.Message) // INVALID_ARGUMENT text is empty
	}
}

// Command baton-full is the baton binary with the backends that live in modules of their own,
// because their clients are too heavy for the core module, registered as store URLs:
//
//	etcd://[user:pass@]host:port[,host:port…][?baton_prefix=P&dial_timeout=5s]
//	dynamodb://table[?region=R&endpoint=http://host:port&create_table=true&max_attempts=10]
//	kubernetes://[namespace][?kubeconfig=PATH&context=NAME]
//
// Everything else is cmd/baton: the same commands, flags and built-in store URLs.
package main

import (
	"os"

	"github.com/batonhq/baton/internal/cli"
	"github.com/batonhq/baton/internal/storeurl"
	batondynamodb "github.com/batonhq/baton/store/dynamodb"
	batonetcd "github.com/batonhq/baton/store/etcd"
	batonkube "github.com/batonhq/baton/store/kubernetes"
)

func main() {
	storeurl.Register("etcd", batonetcd.OpenURL)
	storeurl.Register("dynamodb", batondynamodb.OpenURL)
	storeurl.Register("kubernetes", batonkube.OpenURL)
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

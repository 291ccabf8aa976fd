from neuron_port.cli import main

main()
